//! Values no peer may guess (session ids, console cookies and CSRF tokens, OAuth `state` and
//! PKCE verifiers, client assertions' `jti`, progress tokens, parked calls' `requestState`,
//! temporary files' names), all from the operating system's source, one way.
//!
//! There is no fallback: a value made without randomness could be guessed. A system that gives
//! none is refused before any command runs ([`check`]), and should its source fail later,
//! moniker stops rather than hand out such a value (Rust's own hash maps need the same source: a
//! process without it cannot go on anyway).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Whether the system gives random bytes: `Err` says why moniker cannot start without them.
pub fn check() -> Result<(), String> {
    let mut probe = [0u8; 16];
    getrandom::fill(&mut probe).map_err(|e| {
        format!(
            "the system gives no random bytes ({e}): moniker cannot make session ids and OAuth values that no one could guess"
        )
    })
}

/// `buffer` filled from the system's source.
pub(crate) fn fill(buffer: &mut [u8]) {
    if let Err(error) = getrandom::fill(buffer) {
        tracing::error!(%error, "the system's random source failed: moniker stops rather than make a value others could guess");
        std::process::abort();
    }
}

/// `bytes` random bytes as base64url, without padding.
pub(crate) fn text(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    fill(&mut buffer);
    URL_SAFE_NO_PAD.encode(buffer)
}

/// `N` random bytes (shown as hex by [`crate::files::hex`]).
pub(crate) fn bytes<const N: usize>() -> [u8; N] {
    let mut buffer = [0u8; N];
    fill(&mut buffer);
    buffer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_have_their_length_and_differ() {
        assert!(check().is_ok());
        let (a, b) = (text(32), text(32));
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        let id = crate::files::hex(&bytes::<32>());
        assert_eq!(id.len(), 64);
        assert!(
            id.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(id, crate::files::hex(&bytes::<32>()));
    }
}
