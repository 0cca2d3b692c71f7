//! ASCII authentication (`-Y auth_file`), as memcached 1.6.18 does it
//! (`proto_text.c`, `try_read_command_asciiauth`, and `authfile.c`).
//!
//! The file holds `user:password` lines. A new connection is not
//! authenticated: every request line gets `CLIENT_ERROR unauthenticated`,
//! except a `set <key> <flags> <exptime> <bytes>` (key, flags and exptime
//! are ignored) whose data block is `user password`, which gets `STORED`
//! and authenticates the connection, or `CLIENT_ERROR authentication
//! failure`. A data block without its `\r\n` gets `CLIENT_ERROR bad command
//! line termination`, one with fewer than two words `CLIENT_ERROR bad
//! authentication token format`. A connection that sends 2 KiB without a
//! newline is closed. As in memcached, where these replies share one
//! response object until it is written, of the replies before
//! authentication that one read brought only the last is sent (a client
//! that pipelines failed attempts gets one reply; the differential test in
//! `tests/access.rs` shows it). The file is read at start (an unreadable or
//! malformed file stops the start) and again on SIGHUP; a reload that
//! fails keeps the users loaded before.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

/// memcached closes an unauthenticated connection whose line is this long
/// without a newline.
const MAX_LINE: usize = 2048;
/// Longest auth data block waited for. memcached's file lines are at most
/// 256 bytes, so a longer `user password` can never match; one longer than
/// this closes the connection rather than growing its buffer.
const MAX_TOKEN: usize = 64 << 10;

/// The users of an auth file.
#[derive(Debug, Default)]
pub struct AuthFile {
    users: Vec<(Vec<u8>, Vec<u8>)>,
}

impl AuthFile {
    /// Reads `user:password` lines (the password runs to the end of the
    /// line; a line without ':' is an error, as in memcached).
    pub fn load(path: &Path) -> Result<AuthFile> {
        let data = std::fs::read(path)
            .with_context(|| format!("Could not open authfile [{}] for reading", path.display()))?;
        AuthFile::parse(path, &data)
    }

    fn parse(path: &Path, data: &[u8]) -> Result<AuthFile> {
        let mut users = Vec::new();
        for line in data.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                bail!(
                    "Authfile [{}] has a malformed entry. Should be 'user:password'",
                    path.display()
                );
            };
            users.push((line[..colon].to_vec(), line[colon + 1..].to_vec()));
        }
        Ok(AuthFile { users })
    }

    /// Whether `user` with `pass` is in the file. Compares every entry in
    /// full, so the time taken does not tell how much of a guess matched.
    pub fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        self.users
            .iter()
            .fold(false, |ok, (u, p)| ok | (ct_eq(u, user) & ct_eq(p, pass)))
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// Equality whose time depends on the lengths only.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The loaded auth file, replaced whole on reload.
#[derive(Debug)]
pub struct Auth {
    path: std::path::PathBuf,
    file: RwLock<AuthFile>,
    /// The file's bytes as last read (see [`Auth::check_current`]).
    read: std::sync::Mutex<Vec<u8>>,
    /// Attempts (`auth_cmds`) and failures (`auth_errors`).
    cmds: AtomicU64,
    errors: AtomicU64,
}

impl Auth {
    pub fn load(path: &Path) -> Result<Auth> {
        Ok(Auth {
            path: path.to_path_buf(),
            file: RwLock::new(AuthFile::load(path)?),
            read: std::sync::Mutex::new(std::fs::read(path).unwrap_or_default()),
            cmds: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    /// `auth_cmds` and `auth_errors`.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.cmds.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
        )
    }

    /// Reads the file again (SIGHUP); on error the old users stay.
    pub fn reload(&self) {
        match AuthFile::load(&self.path) {
            Ok(f) => {
                tracing::info!(users = f.len(), file = %self.path.display(), "auth file reloaded");
                *self.file.write().unwrap_or_else(PoisonError::into_inner) = f;
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "auth file not reloaded; the users loaded before stay")
            }
        }
    }

    /// [`check`](Self::check) against the file as it is now. memcached's
    /// SASL password database is read on every authentication (its
    /// `sasl_server_userdb_checkpass` opens the file each time), so users
    /// added or removed count at once, with no SIGHUP: the file is read
    /// here too (a few hundred bytes, once per connection), and parsed
    /// again when its bytes changed. A file that cannot be read or parsed
    /// keeps the users read before, as a failed SIGHUP reload does.
    pub(crate) fn check_current(&self, user: &[u8], pass: &[u8]) -> bool {
        if let Ok(now) = std::fs::read(&self.path) {
            let mut read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
            if *read != now {
                match AuthFile::parse(&self.path, &now) {
                    Ok(f) => {
                        tracing::info!(users = f.len(), file = %self.path.display(), "password file changed: read again");
                        *self.file.write().unwrap_or_else(PoisonError::into_inner) = f;
                    }
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "password file changed but not read; the users read before stay")
                    }
                }
                *read = now;
            }
        }
        self.check(user, pass)
    }

    /// Whether `user` with `pass` is in the file, counted as an attempt
    /// (and a failure).
    pub(crate) fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        let ok = self
            .file
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .check(user, pass);
        self.cmds.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }
}

impl Auth {
    /// An attempt that failed before any user was checked (a malformed
    /// SASL token, an unknown mechanism).
    pub(crate) fn failed(&self) {
        self.cmds.fetch_add(1, Ordering::Relaxed);
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// What an unauthenticated connection's input led to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing complete yet: wait until `need` bytes are buffered (0: a
    /// line's newline).
    Need(usize),
    /// `consumed` bytes answered (the reply is in the output); `authed`:
    /// the connection is now authenticated.
    Answered { consumed: usize, authed: bool },
    /// Too long without a newline, or an impossible token: close.
    Close,
}

/// memcached's tokenizer: words separated by spaces (runs of them count
/// as one).
fn words(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&b| b == b' ').filter(|w| !w.is_empty())
}

/// Runs the head of an unauthenticated connection's input: `buf` starts
/// with a request line.
pub fn step(buf: &[u8], out: &mut Vec<u8>, auth: &Auth) -> Step {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() > MAX_LINE {
            Step::Close
        } else {
            Step::Need(0)
        };
    };
    let line = &buf[..nl];
    let w: Vec<&[u8]> = words(line).take(5).collect();
    // strtoul stops at the '\r' left at the line's end.
    let size = w.get(4).and_then(|s| {
        let s = s.strip_suffix(b"\r").unwrap_or(s);
        std::str::from_utf8(s).ok()?.parse::<usize>().ok()
    });
    let size = match size {
        Some(n) if w.first() == Some(&&b"set"[..]) => n,
        _ => {
            out.extend_from_slice(b"CLIENT_ERROR unauthenticated\r\n");
            return Step::Answered {
                consumed: nl + 1,
                authed: false,
            };
        }
    };
    if size > MAX_TOKEN {
        return Step::Close;
    }
    let total = nl + 1 + size + 2;
    if buf.len() < total {
        return Step::Need(total);
    }
    let data = &buf[nl + 1..total];
    let reply: &[u8];
    let mut authed = false;
    if !data.ends_with(b"\r\n") {
        reply = b"CLIENT_ERROR bad command line termination\r\n";
    } else {
        let token: Vec<&[u8]> = words(&data[..size]).take(2).collect();
        match token[..] {
            [user, pass] => {
                authed = auth.check(user, pass);
                reply = if authed {
                    b"STORED\r\n"
                } else {
                    b"CLIENT_ERROR authentication failure\r\n"
                };
            }
            _ => reply = b"CLIENT_ERROR bad authentication token format\r\n",
        }
    }
    out.extend_from_slice(reply);
    Step::Answered {
        consumed: total,
        authed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        Auth {
            path: "unused".into(),
            file: RwLock::new(AuthFile {
                users: vec![(b"alice".to_vec(), b"secret".to_vec())],
            }),
            read: Default::default(),
            cmds: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    fn run(input: &[u8]) -> (Step, String) {
        let mut out = Vec::new();
        let s = step(input, &mut out, &auth());
        (s, String::from_utf8(out).unwrap())
    }

    #[test]
    fn replies_as_memcached() {
        let (s, o) = run(b"get foo\r\n");
        assert_eq!(
            s,
            Step::Answered {
                consumed: 9,
                authed: false
            }
        );
        assert_eq!(o, "CLIENT_ERROR unauthenticated\r\n");
        let (_, o) = run(b"set a 0 0 5\r\nhello\r\n");
        assert_eq!(o, "CLIENT_ERROR bad authentication token format\r\n");
        let (_, o) = run(b"set a 0 0 10\r\nalice nope\r\n");
        assert_eq!(o, "CLIENT_ERROR authentication failure\r\n");
        let (s, o) = run(b"set a 0 0 12 noreply\r\nalice secret\r\nget a\r\n");
        assert_eq!(
            s,
            Step::Answered {
                consumed: 36,
                authed: true
            }
        );
        assert_eq!(o, "STORED\r\n");
        let (_, o) = run(b"set a 0 0 4\r\nalicexx\r\n");
        assert_eq!(o, "CLIENT_ERROR bad command line termination\r\n");
        assert_eq!(run(b"set a 0 0 12\r\nalice").0, Step::Need(28));
        assert_eq!(run(b"get").0, Step::Need(0));
        assert_eq!(run(&[b'x'; 3000]).0, Step::Close);
    }

    #[test]
    fn file_lines_are_user_colon_password() {
        let dir = std::env::temp_dir().join(format!("tc-auth-{}", std::process::id()));
        std::fs::write(&dir, "alice:se:cret\r\nbob:pw\n\n").unwrap();
        let f = AuthFile::load(&dir).unwrap();
        assert!(f.check(b"alice", b"se:cret"));
        assert!(f.check(b"bob", b"pw"));
        assert!(!f.check(b"bob", b"pw2"));
        assert!(!f.check(b"bo", b"pw"));
        std::fs::write(&dir, "alice\n").unwrap();
        let e = AuthFile::load(&dir).unwrap_err().to_string();
        assert!(e.contains("malformed"), "{e}");
        std::fs::remove_file(&dir).unwrap();
    }
}
