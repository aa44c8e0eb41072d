//! Hostile input on the Unix socket: requests built to crash, confuse or
//! stall the daemon get an error, and the daemon keeps serving everyone else.

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
"#;

/// Sends `bytes` on a fresh connection (from a task of its own, so a daemon
/// that answers and closes early cannot block it) and reads until the daemon
/// closes the connection or `wait` passes.
async fn exchange(d: &Daemon, bytes: Vec<u8>, wait: Duration) -> String {
    let s = UnixStream::connect(&d.socket).await.unwrap();
    let (mut r, mut w) = s.into_split();
    let writer = tokio::spawn(async move {
        // The daemon may close before reading it all: a broken pipe is expected.
        let _ = w.write_all(&bytes).await;
        w
    });
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, r.read_to_end(&mut out)).await;
    drop(writer.await);
    String::from_utf8_lossy(&out).into_owned()
}

async fn ping(d: &Daemon) -> String {
    exchange(d, b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n".to_vec(), Duration::from_secs(5)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_arrays_get_an_error_and_the_daemon_serves_on() {
    let d = Daemon::start(CONFIG).await;
    // A recursive decoder overflows its stack on this and aborts the process.
    let out = exchange(&d, b"*1\r\n".repeat(300_000), Duration::from_secs(10)).await;
    assert!(out.starts_with("-ERR protocol error: nested arrays"), "{out:?}");
    assert!(out.ends_with("; closing connection\r\n"), "one error line, then the connection is closed: {out:?}");
    assert_eq!(ping(&d).await, "+PONG\r\n+OK\r\n", "other connections are served");
    d.stop().await;
}

/// CPU time a process has used, in clock ticks (`USER_HZ`, 100 a second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name: state is the first, utime the 12th, stime the 13th.
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn out_of_file_descriptors_the_accept_loop_pauses_instead_of_spinning() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    if !std::path::Path::new("/proc/self/stat").exists() {
        eprintln!("skipped: needs /proc to read the daemon's CPU time");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("leasehold.sock");
    let log = dir.path().join("stderr.log");
    // At most 64 descriptors: the connections below exhaust them.
    let mut child = std::process::Command::new("sh")
        .args(["-c", "ulimit -n 64 && exec \"$@\"", "sh", env!("CARGO_BIN_EXE_leasehold")])
        .args(["serve", "--store", "memory", "--http", "127.0.0.1:0", "--socket"])
        .arg(&socket)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Listening once a connection succeeds (the path may exist a moment before).
    for _ in 0..200 {
        if UnixStream::connect(&socket).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let pid = child.id();
    // More connections than it has descriptors: the extra ones wait in the
    // listen queue, and every accept of them fails with EMFILE.
    let held: Vec<UnixStream> = (0..80).map(|_| UnixStream::connect(&socket).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(pid) - before;
    assert!(used < 20, "{used} of 100 ticks of CPU in one second with no descriptors left: the accept loop spins");
    // Once descriptors are free again, new clients are served.
    drop(held);
    let mut c = UnixStream::connect(&socket).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut pong = [0u8; 7];
    c.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    child.kill().unwrap();
    child.wait().unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    let lines = logged.lines().filter(|l| l.contains("cannot accept")).count();
    assert!((1..=2).contains(&lines), "failed accepts are logged, rate-limited:\n{logged}");
}
