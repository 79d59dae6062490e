//! Every string netpol puts into an `nft` script that does not come from a fixed vocabulary:
//! chain names and chain comments. Both are built from endpoint keys (`namespace/name`), which an
//! API server bounds (317 bytes, DNS-label characters) but a file read in embedded mode does not:
//! a key may hold quotes, newlines, semicolons, braces or any Unicode. Chain names are hashes;
//! comments keep a safe, bounded prefix of the key. Neither can end a statement, open a block or
//! exceed what nft accepts, whatever the key, so no key can change the meaning of a script or make
//! the kernel refuse one.

use netpol_engine::Direction;
use sha2::{Digest, Sha256};

/// nft refuses a comment longer than this many bytes (`NFTNL_UDATA_COMMENT_MAXLEN`).
pub const COMMENT_MAX: usize = 128;

/// How many bytes of the key a comment keeps at most; the rest of [`COMMENT_MAX`] is the
/// direction's words ("ingress of ") and the hash suffix.
const KEY_BUDGET: usize = 96;

/// 64 bits of the SHA-256 of `parts`, in hex.
pub fn hash<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut digest = Sha256::new();
    for part in parts {
        digest.update(part.as_bytes());
        digest.update(b"\n");
    }
    digest.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The chain of one endpoint direction with these lines: `ep_` plus a hash of the endpoint key
/// (stable across restarts, valid whatever characters the key holds), the direction, and a hash
/// of the lines.
pub fn chain_name(endpoint: &str, direction: Direction, lines: &[String]) -> String {
    let content = hash(lines.iter().map(String::as_str));
    format!("{}{content}", endpoint_prefix(endpoint, direction))
}

/// What every chain name of one endpoint direction starts with, whatever its content.
pub fn endpoint_prefix(endpoint: &str, direction: Direction) -> String {
    let suffix = match direction {
        Direction::Ingress => "in",
        Direction::Egress => "out",
    };
    format!("ep_{}_{suffix}_", hash([endpoint]))
}

/// What audit chains' names start with (`audit_<hash of the key>_in|out_<hash of the lines>`).
pub const AUDIT_PREFIX: &str = "audit_";

/// The audit chain of one endpoint direction with these lines (see
/// [`crate::ruleset::EndpointChains`]): named like its endpoint chain, under [`AUDIT_PREFIX`].
pub fn audit_chain_name(endpoint: &str, direction: Direction, lines: &[String]) -> String {
    let name = chain_name(endpoint, direction, lines);
    format!(
        "{AUDIT_PREFIX}{}",
        name.strip_prefix("ep_").unwrap_or(&name)
    )
}

/// The comment line of an endpoint chain: `comment "ingress of x/a"`. A key that holds anything
/// but ASCII letters, digits and `-._/:@`, or is longer than the budget, is shown by a prefix
/// with every other character replaced by `_`, then `~` and a hash of the whole key, so that two
/// keys never share a comment and the comment is always under nft's limit.
pub fn comment_line(endpoint: &str, direction: Direction) -> String {
    format!("comment \"{direction} of {}\"", comment_key(endpoint))
}

fn comment_key(key: &str) -> String {
    let safe =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '/' | ':' | '@');
    if key.len() <= KEY_BUDGET && key.chars().all(safe) {
        return key.to_string();
    }
    let suffix = format!("~{}", hash([key]));
    let keep = KEY_BUDGET - suffix.len();
    let prefix: String = key
        .chars()
        .map(|c| if safe(c) { c } else { '_' })
        .take(keep)
        .collect();
    prefix + &suffix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_are_stable_identifiers_that_change_with_content() {
        let lines = vec!["drop".to_string()];
        let name = chain_name("x/a \"quoted\"", Direction::Ingress, &lines);
        assert_eq!(
            name,
            chain_name("x/a \"quoted\"", Direction::Ingress, &lines)
        );
        assert_ne!(name, chain_name("x/a \"quoted\"", Direction::Ingress, &[]));
        assert!(name.starts_with("ep_") && name.contains("_in_"));
        assert!(name.starts_with(&endpoint_prefix("x/a \"quoted\"", Direction::Ingress)));
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }

    #[test]
    fn a_plain_key_is_its_own_comment() {
        assert_eq!(
            comment_line("default/web-0", Direction::Ingress),
            "comment \"ingress of default/web-0\""
        );
    }

    #[test]
    fn hostile_and_long_keys_become_bounded_safe_comments() {
        let longest = format!("{}/{}", "n".repeat(63), "p".repeat(253));
        let hostile = [
            longest.as_str(),
            "x/a\" drop; }\ntable inet evil { chain c { accept",
            "x/{brace}",
            "x/semi;colon",
            "x/back\\slash",
            "x/ünïcødé-名前",
            "x/new\nline",
            "x/tab\there",
        ];
        let mut seen = std::collections::HashSet::new();
        for key in hostile {
            for direction in Direction::BOTH {
                let line = comment_line(key, direction);
                assert!(line.len() <= "comment \"\"".len() + COMMENT_MAX, "{line}");
                let inner = &line["comment \"".len()..line.len() - 1];
                assert!(inner.len() <= COMMENT_MAX, "{inner}");
                assert!(
                    inner.chars().all(|c| c.is_ascii_graphic() || c == ' '),
                    "{inner:?}"
                );
                assert!(
                    !inner.contains(['"', ';', '{', '}', '\\', '\n', '#']),
                    "{inner}"
                );
                assert!(seen.insert(line), "two keys share a comment");
            }
        }
    }
}
