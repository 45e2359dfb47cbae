//! How a command ends: its exit code (STYLE 9: 0 ok, 1 runtime failure, 2 usage, 77 a login
//! needed, 78 invalid config), and a runtime failure, which `main` prints.

use std::error::Error;
use std::process::ExitCode;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    /// The servers, the network or the file system failed us.
    Failure = 1,
    /// A server needs a person to log in: `moniker login SERVER` (`EX_NOPERM`).
    NeedsLogin = 77,
    /// The config is invalid (`EX_CONFIG` from sysexits.h).
    InvalidConfig = 78,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// A runtime failure: printed as `error: ...` with its causes, and exit code 1.
pub type Failure = Box<dyn Error + Send + Sync>;

/// Whether stdout was closed under us (`moniker list | head -1`): not a failure.
pub(crate) fn is_broken_pipe(error: &(dyn Error + 'static)) -> bool {
    std::iter::successors(Some(error), |&e| e.source()).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("cannot print the listing")
        }
    }

    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_closed_stdout_is_not_a_failure() {
        let pipe = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let failure: Failure = pipe().into();
        assert!(is_broken_pipe(failure.as_ref()));
        let failure: Failure = Box::new(Wrapped(pipe()));
        assert!(is_broken_pipe(failure.as_ref()));
        let failure: Failure = std::io::Error::other("disk on fire").into();
        assert!(!is_broken_pipe(failure.as_ref()));
        let failure: Failure = "no config file".into();
        assert!(!is_broken_pipe(failure.as_ref()));
    }
}
