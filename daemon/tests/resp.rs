//! The Unix-socket surface through a real Redis client and through raw bytes.

mod common;

use std::time::Duration;

use common::Daemon;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const CONFIG: &str = r#"
[limits.api]
algorithm = "gcra"
limit = 10
period = "1s"
burst = 5

[limits.exact]
algorithm = "fixed_window"
limit = 3
window = "1h"
mode = "direct"
"#;

async fn client(d: &Daemon) -> redis::aio::MultiplexedConnection {
    let url = format!("redis+unix://{}", d.socket.display());
    redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap()
}

async fn raw(d: &Daemon, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(&d.socket).await.unwrap();
    let _ = s.write_all(bytes).await; // the daemon may answer and close before reading it all
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_millis(300), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttle_and_status_through_a_redis_client() {
    let d = Daemon::start(CONFIG).await;
    let mut c = client(&d).await;
    let first: Vec<i64> = redis::cmd("THROTTLE").arg("api").arg("u1").query_async(&mut c).await.unwrap();
    assert_eq!(first, [1, 5, 4, -1, 100]);
    let heavy: Vec<i64> = redis::cmd("THROTTLE").arg("api").arg("u1").arg(4).query_async(&mut c).await.unwrap();
    assert_eq!(&heavy[..4], [1, 5, 0, -1]);
    let denied: Vec<i64> = redis::cmd("THROTTLE").arg("api").arg("u1").query_async(&mut c).await.unwrap();
    assert_eq!(denied[0], 0);
    assert!((1..=100).contains(&denied[3]), "retry within one interval: {denied:?}");
    let status: Vec<i64> = redis::cmd("STATUS").arg("api").arg("u2").query_async(&mut c).await.unwrap();
    assert_eq!(status, [1, 5, 5, -1, 0], "a fresh key, untouched by STATUS");
    for expected in [1, 1, 1, 0] {
        let r: Vec<i64> = redis::cmd("THROTTLE").arg("exact").arg("k").query_async(&mut c).await.unwrap();
        assert_eq!(r[0], expected);
    }
    let pong: String = redis::cmd("PING").query_async(&mut c).await.unwrap();
    assert_eq!(pong, "PONG");
    let info: String = redis::cmd("INFO").query_async(&mut c).await.unwrap();
    assert!(info.contains("allowed_store:") && info.contains("limits:api,exact"), "{info}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cl_throttle_replies_like_redis_cell() {
    let d = Daemon::start(CONFIG).await;
    let mut c = client(&d).await;
    // 30 per 60 s, max_burst 15: 16 at once, then one every 2 s.
    let mut replies = Vec::new();
    for _ in 0..17 {
        let r: Vec<i64> =
            redis::cmd("CL.THROTTLE").arg("user123").arg(15).arg(30).arg(60).query_async(&mut c).await.unwrap();
        replies.push(r);
    }
    assert_eq!(replies[0], [0, 16, 15, -1, 2]);
    assert_eq!(replies[15], [0, 16, 0, -1, 32]);
    assert_eq!(replies[16], [1, 16, 0, 2, 32]);
    let err =
        redis::cmd("CL.THROTTLE").arg("k").arg(1).arg(0).arg(60).query_async::<Vec<i64>>(&mut c).await.unwrap_err();
    assert!(err.to_string().contains("count must be at least 1"), "{err}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_problem_and_keep_the_connection() {
    let d = Daemon::start(CONFIG).await;
    let mut c = client(&d).await;
    let cases: [(&[&str], &str); 6] = [
        (&["THROTTLE", "nope", "k"], "unknown limit 'nope'"),
        (&["THROTTLE", "api"], "wrong number of arguments for 'throttle'"),
        (&["THROTTLE", "api", "k", "lots"], "cost must be a non-negative integer, got 'lots'"),
        (&["FLUSHALL"], "unknown command 'FLUSHALL'"),
        (&["SELECT", "3"], "SELECT 0"),
        (&["HELLO", "3"], "RESP2"),
    ];
    for (args, needle) in cases {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let err = cmd.query_async::<redis::Value>(&mut c).await.unwrap_err().to_string();
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let still: Vec<i64> = redis::cmd("THROTTLE").arg("api").arg("k").query_async(&mut c).await.unwrap();
    assert_eq!(still[0], 1, "the connection is still usable");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_and_partial_frames_are_answered_in_order() {
    let d = Daemon::start(CONFIG).await;
    let mut s = UnixStream::connect(&d.socket).await.unwrap();
    // Three commands in one write, the last split across two writes.
    s.write_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n*3\r\n$8\r\nTHROTTLE\r\n$3\r\napi\r\n$1\r")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.write_all(b"\nz\r\n").await.unwrap();
    let expected = "+PONG\r\n$2\r\nhi\r\n*5\r\n:1\r\n:5\r\n:4\r\n:-1\r\n:100\r\n";
    let mut got = vec![0u8; expected.len()];
    tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut got)).await.unwrap().unwrap();
    assert_eq!(String::from_utf8_lossy(&got), expected);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_gets_an_error_and_a_clean_close_and_the_daemon_lives_on() {
    let d = Daemon::start(CONFIG).await;
    let out = raw(&d, b"\x00\xff\x13garbage\r\n").await;
    assert!(out.starts_with("-ERR protocol error"), "{out:?}");
    let out = raw(&d, b"*1\r\n:5\r\n").await;
    assert!(out.starts_with("-ERR"), "{out:?}");
    let out = raw(&d, b"+PING\r\n").await;
    assert!(out.starts_with("-ERR expected a command"), "{out:?}");
    let out = raw(&d, b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n").await;
    assert_eq!(out, "+OK\r\n", "QUIT answers and closes");
    let mut c = client(&d).await;
    let pong: String = redis::cmd("PING").query_async(&mut c).await.unwrap();
    assert_eq!(pong, "PONG");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_limit_turns_the_extra_client_away() {
    let d = Daemon::start(&format!("{CONFIG}\n[server]\nmax_connections = 2\n")).await;
    let _a = UnixStream::connect(&d.socket).await.unwrap();
    let _b = UnixStream::connect(&d.socket).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let out = raw(&d, b"*1\r\n$4\r\nPING\r\n").await;
    assert!(out.contains("max connections"), "{out:?}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_is_private_and_a_stale_file_is_replaced() {
    use std::os::unix::fs::PermissionsExt;
    let d = Daemon::start(CONFIG).await;
    let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);
    let err = leasehold::surfaces::resp::bind(&d.socket).unwrap_err();
    assert!(err.to_string().contains("another process is listening"), "{err}");
    d.stop().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.sock");
    std::fs::write(&path, b"stale").unwrap();
    let again = leasehold::surfaces::resp::bind(&path);
    assert!(again.is_ok(), "a stale file is replaced: {again:?}");
}
