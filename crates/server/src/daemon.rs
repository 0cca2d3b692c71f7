//! Running as a service, as memcached does: `-d` (daemonize), `-P`
//! (pid file) and `-u` (drop root privileges after binding).
//!
//! The order in `main`: look the `-u` user up and refuse root without it
//! (before anything else), daemonize (before any thread exists: fork keeps
//! only the calling thread), start the server (bind, devices), write the
//! pid file, switch user, then tell the waiting parent that the server
//! runs. An error at any step reaches the parent through a pipe, so `-d`
//! exits with the same message and code as a foreground start would.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Why the process cannot run, and its exit code (sysexits.h).
#[derive(Debug)]
pub struct Refusal {
    pub code: i32,
    pub msg: String,
}

impl Refusal {
    fn new(code: i32, msg: impl Into<String>) -> Refusal {
        Refusal {
            code,
            msg: msg.into(),
        }
    }
}

/// EX_USAGE, EX_NOUSER, EX_OSERR, EX_CANTCREAT.
pub const EX_USAGE: i32 = 64;
pub const EX_NOUSER: i32 = 67;
pub const EX_OSERR: i32 = 71;
pub const EX_CANTCREAT: i32 = 73;

/// The account `-u` names.
#[derive(Debug, Clone)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// Looks `name` up in the user database.
pub fn lookup_user(name: &str) -> Result<User, Refusal> {
    let cname = CString::new(name)
        .map_err(|_| Refusal::new(EX_USAGE, format!("-u {name:?}: not a user name")))?;
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: a zeroed passwd the call fills, a buffer with its length for
    // the strings it points into, and a result pointer; getpwnam_r is the
    // thread-safe form and touches nothing else.
    #[allow(unsafe_code)]
    let (rc, found, uid, gid) = unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        );
        (rc, !result.is_null(), pw.pw_uid, pw.pw_gid)
    };
    if rc != 0 {
        return Err(Refusal::new(
            EX_NOUSER,
            format!(
                "-u {name}: cannot read the user database: {}",
                std::io::Error::from_raw_os_error(rc)
            ),
        ));
    }
    if !found {
        return Err(Refusal::new(
            EX_NOUSER,
            format!("can't find the user {name} to switch to (-u {name}: no such user)"),
        ));
    }
    Ok(User {
        name: name.to_string(),
        uid,
        gid,
    })
}

/// Whether the process runs as root (real or effective).
pub fn is_root() -> bool {
    // SAFETY: getuid and geteuid cannot fail and have no effects.
    #[allow(unsafe_code)]
    unsafe {
        libc::getuid() == 0 || libc::geteuid() == 0
    }
}

/// memcached's rule: root must say which user to run as (`-u root` to
/// stay root), so that a server is not left running as root by mistake.
/// Returns the user to switch to, if any; as root an unknown user is
/// refused. Not started as root there is nothing to switch, and `-u` is
/// not looked up (memcached: "only when run as root"), so a memcached
/// command line's `-u memcache` runs where that user does not exist.
pub fn check_user(user: Option<&str>) -> Result<Option<User>, Refusal> {
    if !is_root() {
        return Ok(None);
    }
    let user = user.map(lookup_user).transpose()?;
    if user.is_none() {
        return Err(Refusal::new(
            EX_USAGE,
            "can't run as root without the -u switch (give -u USER to switch to USER after \
             binding, or -u root to stay root)",
        ));
    }
    Ok(user)
}

/// Switches to `user` (groups, gid, then uid) if the process is root;
/// otherwise there is nothing to switch (memcached ignores -u then too).
pub fn drop_privileges(user: &User) -> Result<bool, Refusal> {
    if !is_root() {
        return Ok(false);
    }
    if user.uid == 0 {
        return Ok(false);
    }
    let cname =
        CString::new(user.name.as_str()).map_err(|_| Refusal::new(EX_USAGE, "bad user name"))?;
    // SAFETY: plain system calls with values we own; glibc applies setgid
    // and setuid to every thread of the process (POSIX semantics).
    #[allow(unsafe_code)]
    let steps = unsafe {
        [
            ("initgroups", libc::initgroups(cname.as_ptr(), user.gid)),
            ("setgid", libc::setgid(user.gid)),
            ("setuid", libc::setuid(user.uid)),
        ]
    };
    for (what, rc) in steps {
        if rc != 0 {
            return Err(Refusal::new(
                EX_OSERR,
                format!(
                    "-u {}: {what} failed: {}",
                    user.name,
                    std::io::Error::last_os_error()
                ),
            ));
        }
    }
    Ok(true)
}

/// After a switch to `user`: warns when the directory of the shutdown
/// snapshot (next to the first flash device) is not writable by it, since
/// the snapshot would then fail at exit and the next start recover the
/// flash tier from the device instead (slower).
pub fn check_snapshot_dir(user: &User, snapshot: &Path) {
    let dir = match snapshot.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(c) = CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return;
    };
    // SAFETY: access reads the NUL-terminated path we own; no other effects.
    #[allow(unsafe_code)]
    let writable = unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0;
    if !writable {
        tracing::warn!(
            user = %user.name,
            dir = %dir.display(),
            "the shutdown snapshot cannot be written here by -u's user: the next start will \
             recover the flash tier from the device instead (give the user this directory)"
        );
    }
}

/// `-k`: locks all the process's memory, present and future, so that none
/// of it is paged out (memcached's -k); an error says why it failed.
pub fn lock_memory() -> Result<(), Refusal> {
    // SAFETY: mlockall takes flags only and has no other effects.
    #[allow(unsafe_code)]
    let r = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if r != 0 {
        return Err(Refusal::new(
            EX_OSERR,
            format!(
                "-k: cannot lock memory (mlockall): {}; raise the memlock limit (ulimit -l) or run as root",
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(())
}

/// `-r`: raises the soft core file size limit to the hard one (memcached's
/// -r); returns the new limit.
pub fn raise_core_limit() -> Result<u64, Refusal> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct we own.
    #[allow(unsafe_code)]
    let r = unsafe {
        if libc::getrlimit(libc::RLIMIT_CORE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_CORE, &lim)
        } else {
            -1
        }
    };
    if r != 0 {
        return Err(Refusal::new(
            EX_OSERR,
            format!(
                "-r: cannot raise the core file size limit: {}",
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(lim.rlim_cur)
}

/// The pid file (`-P`): written once the server listens, removed when the
/// server stops cleanly.
pub struct PidFile {
    path: PathBuf,
}

impl PidFile {
    /// Writes our pid to `path` (replacing a stale file).
    pub fn write(path: &Path) -> Result<PidFile, Refusal> {
        let text = format!("{}\n", std::process::id());
        std::fs::write(path, text).map_err(|e| {
            Refusal::new(
                EX_CANTCREAT,
                format!("-P {}: cannot write the pid file: {e}", path.display()),
            )
        })?;
        // An absolute path, so that the removal still finds it.
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(PidFile { path })
    }

    /// Removes the file if it still holds our pid.
    pub fn remove(self) {
        let ours = format!("{}\n", std::process::id());
        match std::fs::read_to_string(&self.path) {
            Ok(t) if t == ours => {
                if let Err(e) = std::fs::remove_file(&self.path) {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the pid file");
                }
            }
            Ok(_) => {
                tracing::warn!(path = %self.path.display(), "the pid file holds another pid; left in place")
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot read the pid file back")
            }
        }
    }
}

/// The daemon child's line back to the parent waiting in [`daemonize`].
pub struct Ready {
    pipe: Option<std::fs::File>,
}

impl Ready {
    /// Not daemonized: nothing to tell.
    pub fn none() -> Ready {
        Ready { pipe: None }
    }

    /// The server runs: the parent exits 0.
    pub fn ok(&mut self) {
        if let Some(mut p) = self.pipe.take() {
            let _ = p.write_all(b"0\n");
        }
    }

    /// Start-up failed: the parent prints `msg` and exits with `code`.
    /// Returns whether there was a parent to tell.
    pub fn fail(&mut self, code: i32, msg: &str) -> bool {
        match self.pipe.take() {
            Some(mut p) => {
                let _ = write!(p, "{code}\n{msg}");
                true
            }
            None => false,
        }
    }
}

/// Forks into the background (`-d`). The parent waits until the child says
/// the server runs (exit 0) or why it could not start (its message on
/// stderr and its exit code), and never returns. The child starts a new
/// session, points stdin and stdout (and stderr unless `keep_stderr`, as
/// memcached keeps it with -v) at /dev/null and returns the pipe to report
/// on. The working directory is kept, so relative paths (the default flash
/// file) mean what they meant in the foreground.
///
/// Must be called before any thread is started.
pub fn daemonize(keep_stderr: bool) -> Result<Ready, Refusal> {
    let os = |what: &str| {
        Refusal::new(
            EX_OSERR,
            format!("-d: {what} failed: {}", std::io::Error::last_os_error()),
        )
    };
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two-int array we own.
    #[allow(unsafe_code)]
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os("pipe"));
    }
    // SAFETY: both fds were just made by pipe2 and are owned here only.
    #[allow(unsafe_code)]
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the process has one thread (the caller's contract), so the
    // child is a complete copy; it only returns into main.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(os("fork"));
    }
    if pid > 0 {
        drop(wr);
        let mut text = String::new();
        let _ = std::fs::File::from(rd).read_to_string(&mut text);
        let (code, msg) = text.split_once('\n').unwrap_or((text.as_str(), ""));
        match code.trim().parse::<i32>() {
            Ok(0) => std::process::exit(0),
            Ok(c) => {
                let _ = writeln!(std::io::stderr(), "tiercache: {msg}");
                std::process::exit(c)
            }
            Err(_) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "tiercache: the daemon exited before it was ready (run without -d to see why)"
                );
                std::process::exit(EX_OSERR)
            }
        }
    }
    drop(rd);
    // SAFETY: setsid and dup2 on fds we own; /dev/null is opened here.
    #[allow(unsafe_code)]
    unsafe {
        if libc::setsid() < 0 {
            return Err(os("setsid"));
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null < 0 {
            return Err(os("open /dev/null"));
        }
        let mut targets = vec![0, 1];
        if !keep_stderr {
            targets.push(2);
        }
        for fd in targets {
            if libc::dup2(null, fd) < 0 {
                return Err(os("dup2"));
            }
        }
        if null > 2 {
            libc::close(null);
        }
    }
    Ok(Ready {
        pipe: Some(std::fs::File::from(wr)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_looked_up() {
        let root = lookup_user("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        let e = lookup_user("no-such-user-tiercache").unwrap_err();
        assert_eq!(e.code, EX_NOUSER);
        assert!(e.msg.contains("no such user"), "{}", e.msg);
    }
}
