//! Creating the Unix socket safely.
//!
//! - The socket never exists at its path with a wider mode than
//!   [`SOCKET_MODE`]: it is bound inside a private (0700) directory beside
//!   the path, given its mode there, then hard-linked into place. No umask
//!   change (the umask is per process, and other threads create files too),
//!   and the link fails, rather than replaces, if anything appeared at the
//!   path meanwhile.
//! - Only a stale *socket* is ever removed from the path (one nobody answers
//!   on). A live socket, a regular file, a directory, a symlink or anything
//!   else there stops start-up with an error naming the path.
//! - The socket's directory is created 0700 if missing; an existing one must
//!   belong to this user or root, and may be writable by everyone only with
//!   the sticky bit (as `/tmp` is): otherwise another user could swap the
//!   socket for their own.

use std::fs;
use std::io::{Error, ErrorKind, Result};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// The socket's mode: read and write (connecting needs write) for the owner
/// and its group, nothing for anyone else. Grant a client access by putting
/// it in the daemon's group.
pub const SOCKET_MODE: u32 = 0o660;

/// Mode of directories created for the socket: the owner only.
const DIR_MODE: u32 = 0o700;

fn named(what: &str, path: &Path, e: &Error) -> Error {
    Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

fn refuse(kind: ErrorKind, message: String) -> Error {
    Error::new(kind, message)
}

/// Binds the socket at `path`: prepares its directory, replaces a stale
/// socket, refuses to touch anything else, and creates it with
/// [`SOCKET_MODE`] from the start (see the module docs).
///
/// # Errors
/// An I/O error saying what failed, naming the path.
pub fn bind(path: &Path) -> Result<UnixListener> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    prepare_dir(dir)?;
    remove_stale(path)?;
    let private = PrivateDir::create(dir)?;
    let bound = private.path.join("s");
    let listener = UnixListener::bind(&bound).map_err(|e| named("cannot bind", path, &e))?;
    fs::set_permissions(&bound, fs::Permissions::from_mode(SOCKET_MODE))
        .map_err(|e| named("cannot set permissions on", path, &e))?;
    fs::hard_link(&bound, path).map_err(|e| match e.kind() {
        ErrorKind::AlreadyExists => refuse(
            ErrorKind::AlreadyExists,
            format!("{} appeared while the socket was being created; is another daemon starting?", path.display()),
        ),
        _ => named("cannot create the socket", path, &e),
    })?;
    Ok(listener)
}

/// Removes the socket at `path` when the daemon stops, if a socket is still
/// there (never anything else).
pub fn remove(path: &Path) {
    if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = fs::remove_file(path);
    }
}

/// Creates `dir` (0700) if missing; checks an existing one cannot be written
/// by another user.
fn prepare_dir(dir: &Path) -> Result<()> {
    let meta = match fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(dir)
                .map_err(|e| named("cannot create the socket's directory", dir, &e));
        }
        Err(e) => return Err(named("cannot inspect the socket's directory", dir, &e)),
    };
    if !meta.is_dir() {
        return Err(refuse(ErrorKind::NotADirectory, format!("{} is not a directory", dir.display())));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(refuse(
            ErrorKind::PermissionDenied,
            format!(
                "the socket's directory {} belongs to uid {}, not to this user (uid {me}) or root: its owner could \
                 replace the socket; remove it or choose another --socket",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    let mode = meta.mode();
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Err(refuse(
            ErrorKind::PermissionDenied,
            format!(
                "the socket's directory {} is writable by everyone without the sticky bit (mode {:o}): anyone \
                 could replace the socket; choose another --socket",
                dir.display(),
                mode & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Clears the way for the socket: nothing at `path` is fine; a socket nobody
/// answers on is removed; anything else is an error naming the path.
fn remove_stale(path: &Path) -> Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(named("cannot inspect", path, &e)),
    };
    let kind = meta.file_type();
    if !kind.is_socket() {
        let what = if kind.is_file() {
            "a regular file"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_symlink() {
            "a symbolic link"
        } else {
            "not a socket"
        };
        return Err(refuse(
            ErrorKind::AlreadyExists,
            format!(
                "{} exists and is {what}, not a socket: leasehold only replaces a stale socket; move it away or \
                 choose another --socket",
                path.display()
            ),
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(refuse(
            ErrorKind::AddrInUse,
            format!("another process is listening on {}; stop it or choose another --socket", path.display()),
        )),
        // Nobody listens: a socket left behind by a daemon that did not stop cleanly.
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            fs::remove_file(path).map_err(|e| named("cannot remove the stale socket", path, &e))
        }
        Err(e) => Err(named("cannot tell whether a daemon is listening on", path, &e)),
    }
}

/// A directory only this user can enter, removed (with what is in it) on drop.
struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    fn create(beside: &Path) -> Result<Self> {
        let path = beside.join(format!(".leasehold-bind-{}-{:016x}", std::process::id(), fastrand::u64(..)));
        fs::DirBuilder::new()
            .mode(DIR_MODE)
            .create(&path)
            .map_err(|e| named("cannot create a private directory in", beside, &e))?;
        Ok(Self { path })
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_directory_is_created_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        let path = dir.join("leasehold.sock");
        let _listener = bind(&path).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, DIR_MODE);
        assert_eq!(fs::symlink_metadata(&path).unwrap().mode() & 0o7777, SOCKET_MODE);
        let left: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["leasehold.sock"], "no private directory left behind");
    }

    #[tokio::test]
    async fn a_directory_anyone_can_write_is_refused_unless_sticky() {
        let root = tempfile::tempdir().unwrap();
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let path = root.path().join("leasehold.sock");
        let err = bind(&path).unwrap_err().to_string();
        assert!(err.contains("writable by everyone") && err.contains(&root.path().display().to_string()), "{err}");
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(bind(&path).is_ok(), "sticky, as /tmp is");
    }

    #[tokio::test]
    async fn a_directory_of_another_user_is_refused() {
        if rustix::process::geteuid().as_raw() != 0 {
            eprintln!("skipped: only root can make a directory another user's");
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("theirs");
        fs::create_dir(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
        let err = bind(&dir.join("leasehold.sock")).unwrap_err().to_string();
        assert!(err.contains("belongs to uid 65534"), "{err}");
    }
}
