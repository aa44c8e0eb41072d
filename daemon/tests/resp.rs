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
    assert!(info.contains("limits:api,exact"), "{info}");
    // One host: every decision is made in the table, none waits for a store.
    for line in ["allowed_local:5", "denied_local:2", "allowed_store:0", "denied_store:0"] {
        assert!(info.lines().any(|l| l == line), "{line} in {info}");
    }
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
    // Pipelined, a denial says what remains and when to retry, as redis-cell
    // does: 14 × 7 units pass in 1010 ms of tolerance, 3 remain, retry in 1 s.
    let mut pipe = redis::pipe();
    for _ in 0..30 {
        pipe.cmd("CL.THROTTLE").arg("k").arg(100).arg(1000).arg(10).arg(7);
    }
    let replies: Vec<Vec<i64>> = pipe.query_async(&mut c).await.unwrap();
    for (i, r) in replies[..14].iter().enumerate() {
        assert_eq!(r, &[0, 101, 101 - 7 * (i as i64 + 1), -1, 1], "{replies:?}");
    }
    assert!(replies[14..].iter().all(|r| r == &[1, 101, 3, 1, 1]), "{replies:?}");
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
    let out = raw(&d, b"*1\r\n:5\r\n").await;
    assert_eq!(
        out,
        "-ERR protocol error: command arguments must be bulk strings ('$'), found an integer (':'); closing connection\r\n"
    );
    let out = raw(&d, b"*1\r\n$-1\r\n").await;
    assert!(out.starts_with("-ERR protocol error: a null bulk string"), "{out:?}");
    let out = raw(&d, b"*2\r\n$3\r\nfoo\r\n*1\r\n").await;
    assert!(out.starts_with("-ERR protocol error: nested arrays"), "{out:?}");
    let out = raw(&d, b"*1\r\n$99999999999\r\n").await;
    assert!(out.starts_with("-ERR protocol error: argument of 99999999999 bytes exceeds"), "{out:?}");
    // Inline commands, as typed into `nc -U`.
    let out = raw(&d, b"PING\r\nTHROTTLE api inline-key\r\nQUIT\r\n").await;
    assert!(out.starts_with("+PONG\r\n*5\r\n:1\r\n:5\r\n:4\r\n:-1\r\n:") && out.ends_with("\r\n+OK\r\n"), "{out:?}");
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
async fn the_socket_is_private_and_only_a_stale_socket_is_replaced() {
    use std::os::unix::fs::PermissionsExt;
    let d = Daemon::start(CONFIG).await;
    let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);
    assert_eq!(leasehold::surfaces::resp::SOCKET_MODE, 0o660);
    let err = leasehold::surfaces::resp::bind(&d.socket).unwrap_err();
    assert!(err.to_string().contains("another process is listening"), "{err}");
    d.stop().await;
    // A socket nobody listens on (a daemon killed before removing it) is replaced.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let again = leasehold::surfaces::resp::bind(&path);
    assert!(again.is_ok(), "a stale socket is replaced: {again:?}");
}

#[tokio::test]
async fn anything_but_a_socket_at_the_path_is_left_alone_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leasehold.sock");
    std::fs::write(&path, b"precious").unwrap();
    let err = leasehold::surfaces::resp::bind(&path).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()) && err.contains("regular file"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious", "the file is untouched");
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let err = leasehold::surfaces::resp::bind(&link).unwrap_err().to_string();
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    // Through the binary: start-up fails with a message naming the path.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(["serve", "--store", "memory", "--http", "127.0.0.1:0", "--socket"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&path.display().to_string()) && stderr.contains("not a socket"), "{stderr}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
}

/// A RESP command of raw arguments.
fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_replies_escape_what_the_client_sent() {
    let d = Daemon::start(CONFIG).await;
    // Each argument would forge a second reply (`+OK`) or a terminal escape
    // if it were echoed raw; each error must stay one line, followed by PONG.
    let long = vec![b'A'; 10_000];
    let cases: [(Vec<u8>, &str); 4] = [
        (command(&[b"FOO\r\n+OK"]), "-ERR unknown command 'FOO\\r\\n+OK', leasehold speaks"),
        (
            command(&[b"THROTTLE", b"api", b"k", b"1\r\n+OK\x1b[2J"]),
            "-ERR cost must be a non-negative integer, got '1\\r\\n+OK\\u{1b}[2J'",
        ),
        (command(&[b"THROTTLE", b"no\npe\r", b"k"]), "-ERR unknown limit 'no\\npe\\r'"),
        (
            command(&[&long]),
            "-ERR unknown command 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA...'",
        ),
    ];
    for (mut bytes, expected) in cases {
        bytes.extend_from_slice(b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n");
        let out = raw(&d, &bytes).await;
        let lines: Vec<&str> = out.split_terminator("\r\n").collect();
        assert_eq!(lines.len(), 3, "one error line, then PONG and OK: {out:?}");
        assert!(lines[0].starts_with(expected), "{out:?}");
        assert!(!lines[0].contains(|c: char| c.is_control()), "{out:?}");
        assert!(lines[0].len() < 300, "a long argument is cut: {} bytes", lines[0].len());
        assert_eq!(lines[1..], ["+PONG", "+OK"]);
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_limit_names_longer_than_max_key_bytes_are_refused() {
    let d = Daemon::start(CONFIG).await;
    let mut c = client(&d).await;
    let (longest, too_long) = ("k".repeat(512), "k".repeat(513));
    let key_err = "key is 513 bytes; the limit is 512 (server.max_key_bytes)";
    let name_err = "limit name is 513 bytes; the limit is 512 (server.max_key_bytes)";
    let cases: [(&[&str], &str); 5] = [
        (&["THROTTLE", "api", &too_long], key_err),
        (&["STATUS", "api", &too_long], key_err),
        (&["CL.THROTTLE", &too_long, "1", "10", "60"], key_err),
        (&["THROTTLE", &too_long, "k"], name_err),
        (&["STATUS", &too_long, "k"], name_err),
    ];
    for (args, needle) in cases {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let err = cmd.query_async::<redis::Value>(&mut c).await.unwrap_err().to_string();
        assert!(err.contains(needle), "{}: {err}", args[0]);
    }
    let r: Vec<i64> = redis::cmd("THROTTLE").arg("api").arg(&longest).query_async(&mut c).await.unwrap();
    assert_eq!(r[0], 1, "512 bytes is fine");
    d.stop().await;

    let d = Daemon::start(&format!("{CONFIG}\n[server]\nmax_key_bytes = 8\n")).await;
    let mut c = client(&d).await;
    let err = redis::cmd("THROTTLE").arg("api").arg("123456789").query_async::<redis::Value>(&mut c).await;
    assert!(err.unwrap_err().to_string().contains("key is 9 bytes; the limit is 8 (server.max_key_bytes)"));
    d.stop().await;
}
