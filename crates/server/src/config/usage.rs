//! The command line's own errors and texts: clap's parse errors turned into
//! memcached-style usage errors (exit 64, EX_USAGE, with the flag and why;
//! clap's default is exit 2 and a bare "unexpected argument"), and the
//! text `--help` prints after the flags (the `-o` keys).

use super::{Args, OPTION_GROUPS};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Parser;

/// sysexits' EX_USAGE: what memcached exits with for a bad flag value.
pub const EX_USAGE: i32 = 64;

/// Why the command line did not give [`Args`]: `code` 0 with the text to
/// print on stdout (`--help`, `--version`, `--license`), or [`EX_USAGE`]
/// with the message for stderr.
#[derive(Debug)]
pub struct Usage {
    pub code: i32,
    pub text: String,
}

/// Short help's last lines.
pub const AFTER_HELP: &str =
    "--help lists the -o keys too; docs/COMPATIBILITY.md has every memcached flag and what tiercache does with it.";

/// `--help`'s text after the flags: the `-o` keys by group.
pub fn after_long_help() -> String {
    let mut s = String::from("Extended options (-o key=value,key=value; README, Operating it):\n");
    for (group, keys) in OPTION_GROUPS {
        s.push_str(&format!("  {group}:\n"));
        let mut line = String::from("   ");
        for k in *keys {
            if line.len() + k.len() > 78 {
                s.push_str(&line);
                s.push('\n');
                line = String::from("   ");
            }
            line.push(' ');
            line.push_str(k);
        }
        s.push_str(&line);
        s.push('\n');
    }
    s.push_str("\ndocs/COMPATIBILITY.md has every memcached 1.6 flag, option and command and what tiercache does with it.");
    s
}

/// The license `-i` prints (memcached's `-i` prints its own).
fn license() -> String {
    format!(
        "tiercache {}\n\nLicensed under the Apache License, Version 2.0 ({}): \
         https://www.apache.org/licenses/LICENSE-2.0\n",
        crate::TIERCACHE_VERSION,
        env!("CARGO_PKG_LICENSE")
    )
}

/// Parses the process's command line.
pub fn parse_args() -> Result<Args, Usage> {
    parse_from(std::env::args_os())
}

/// Parses `argv` (its first item is the program name).
pub fn parse_from<I, T>(argv: I) -> Result<Args, Usage>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = Args::try_parse_from(argv).map_err(from_clap)?;
    if args.license {
        return Err(Usage {
            code: 0,
            text: license(),
        });
    }
    Ok(args)
}

/// clap's error as a usage error: help and version are not errors.
fn from_clap(e: clap::Error) -> Usage {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Usage {
            code: 0,
            text: e.render().to_string(),
        },
        _ => Usage {
            code: EX_USAGE,
            text: message(&e),
        },
    }
}

/// One line naming the flag and what is wrong with it.
fn message(e: &clap::Error) -> String {
    let ctx = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    };
    let arg = ctx(ContextKind::InvalidArg).unwrap_or_default();
    let value = ctx(ContextKind::InvalidValue).unwrap_or_default();
    let flag = short_form(&arg);
    let hint = "tiercache --help lists the flags";
    match e.kind() {
        ErrorKind::UnknownArgument => format!(
            "unknown flag '{arg}': not a memcached 1.6 flag nor one of tiercache's ({hint}; docs/COMPATIBILITY.md)"
        ),
        ErrorKind::InvalidValue if value.is_empty() => format!("{flag} needs a value; {hint}"),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let why = match flag.as_str() {
                "-p" | "-U" => "not a port number (0 to 65535)".to_string(),
                _ => {
                    let src = std::error::Error::source(e)
                        .map(|s| s.to_string())
                        .unwrap_or_default();
                    match src.as_str() {
                        "" => "not a valid value".to_string(),
                        s if s.contains("invalid digit") || s.contains("invalid float") => {
                            "not a number".to_string()
                        }
                        s if s.contains("too large") => "too large".to_string(),
                        s => s.to_string(),
                    }
                }
            };
            format!("{flag} {value}: {why}")
        }
        ErrorKind::NoEquals | ErrorKind::TooFewValues => format!("{flag} needs a value; {hint}"),
        _ => format!("{}; {hint}", first_line(e)),
    }
}

/// clap's first line without its "error: " prefix.
fn first_line(e: &clap::Error) -> String {
    let r = e.render().to_string();
    let l = r.lines().next().unwrap_or("bad command line");
    l.strip_prefix("error: ").unwrap_or(l).to_string()
}

/// `-p` for clap's `--port <PORT>` (memcached users know the letters).
fn short_form(arg: &str) -> String {
    let long = arg.split([' ', '=']).next().unwrap_or(arg);
    let name = long.trim_start_matches('-');
    use clap::CommandFactory;
    Args::command()
        .get_arguments()
        .find(|a| a.get_long() == Some(name) || a.get_id() == name)
        .and_then(|a| a.get_short())
        .map_or_else(|| long.to_string(), |c| format!("-{c}"))
}
