//! A refusal stays local. The kernel applies a transaction whole or not at all, so one endpoint
//! whose chains it refuses (a rule it cannot hold, a resource it runs out of) would otherwise keep
//! every endpoint of the node from being programmed. When a transaction is refused, the endpoints
//! whose chains the kernel refuses are found by bisection with check-only transactions (`nft -c`:
//! validated by the kernel, then aborted, nothing committed), and the table is programmed with
//! exactly those endpoints isolated ([`Ruleset::isolate`]).
//!
//! Finding `k` refused endpoints among `n` costs about `2k·log2(n)` checks. If no endpoint's
//! chains are refused on their own (the refusal is elsewhere: the dispatch chain, a deletion),
//! the refusal stands for the whole transaction.

use std::collections::BTreeMap;

use crate::programmer::{program, Known, NftBackend, NftError, ProgramError, ProgramReport};
use crate::ruleset::Ruleset;
use crate::script::{render_check, Table};

/// What [`program_isolating`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Programmed {
    pub report: ProgramReport,
    /// The endpoints whose chains the kernel refused, with its message; they are isolated in
    /// the table that was programmed.
    pub refused: BTreeMap<String, String>,
}

/// [`program`], and when the kernel refuses the transaction, the same with the endpoints whose
/// chains it refuses isolated.
pub fn program_isolating(
    backend: &dyn NftBackend,
    known: &mut Option<Known>,
    ruleset: &Ruleset,
) -> Result<Programmed, ProgramError> {
    let message = match program(backend, known, ruleset) {
        Ok(report) => {
            return Ok(Programmed {
                report,
                refused: BTreeMap::new(),
            })
        }
        Err(ProgramError::Nft(NftError::Refused(message))) => message,
        Err(other) => return Err(other),
    };
    let refused = refused_endpoints(backend, ruleset)?;
    if refused.is_empty() {
        return Err(ProgramError::Nft(NftError::Refused(message)));
    }
    let mut narrowed = ruleset.clone();
    for key in refused.keys() {
        narrowed.isolate(key);
    }
    let report = program(backend, known, &narrowed)?;
    Ok(Programmed { report, refused })
}

/// The endpoints of `ruleset` whose chains the kernel refuses on their own, with its message.
pub fn refused_endpoints(
    backend: &dyn NftBackend,
    ruleset: &Ruleset,
) -> Result<BTreeMap<String, String>, ProgramError> {
    let table = Table::new(ruleset)?;
    let keys: Vec<&str> = ruleset.endpoints.keys().map(String::as_str).collect();
    let mut refused = BTreeMap::new();
    bisect(backend, &table, &keys, false, &mut refused)?;
    Ok(refused)
}

/// Adds to `refused` every key of `keys` whose chains the kernel refuses. `known_bad`: the
/// chains of `keys` together are already known to be refused, so the first check is skipped.
fn bisect(
    backend: &dyn NftBackend,
    table: &Table,
    keys: &[&str],
    known_bad: bool,
    refused: &mut BTreeMap<String, String>,
) -> Result<(), NftError> {
    if keys.is_empty() {
        return Ok(());
    }
    let message = if known_bad && keys.len() > 1 {
        None
    } else {
        let names: Vec<&str> = keys.iter().flat_map(|k| table.endpoint_chains(k)).collect();
        match backend.check(&render_check(table, &names)) {
            Ok(()) => return Ok(()),
            Err(NftError::Refused(message)) => Some(message),
            Err(other) => return Err(other),
        }
    };
    if let ([key], Some(message)) = (keys, message) {
        refused.insert(key.to_string(), message);
        return Ok(());
    }
    let (left, right) = keys.split_at(keys.len() / 2);
    let before = refused.len();
    bisect(backend, table, left, false, refused)?;
    // The whole was refused: if its left half was not, its right half must be.
    let left_clean = refused.len() == before;
    bisect(backend, table, right, left_clean, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_engine::IdentityStore;
    use std::cell::RefCell;

    /// Refuses every script that names an endpoint listed in `poison` (by its comment).
    struct Picky {
        poison: Vec<&'static str>,
        checks: RefCell<usize>,
        applied: RefCell<Vec<String>>,
    }

    impl Picky {
        fn refuses(&self, script: &str) -> Result<(), NftError> {
            match self
                .poison
                .iter()
                .find(|p| script.contains(&format!(" of {p}\"")))
            {
                Some(p) => Err(NftError::Refused(format!("{p} is poison"))),
                None => Ok(()),
            }
        }
    }

    impl NftBackend for Picky {
        fn apply(&self, script: &str) -> Result<(), NftError> {
            self.refuses(script)?;
            self.applied.borrow_mut().push(script.to_string());
            Ok(())
        }

        fn check(&self, script: &str) -> Result<(), NftError> {
            *self.checks.borrow_mut() += 1;
            self.refuses(script)
        }

        fn set_contents(
            &self,
            _: &crate::ruleset::AddressSet,
        ) -> Result<Option<Vec<ipnet::IpNet>>, NftError> {
            Ok(None)
        }

        fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
            Ok(None)
        }

        fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
            Ok(None)
        }
    }

    fn ruleset(n: usize) -> Ruleset {
        let mut ruleset = Ruleset::default();
        for i in 0..n {
            let address = format!("10.0.{}.{}", i / 200, i % 200 + 1).parse().unwrap();
            ruleset.add(
                format!("x/p{i}"),
                vec![address],
                &[],
                &IdentityStore::default(),
            );
        }
        ruleset
    }

    #[test]
    fn the_refused_endpoints_are_found_and_every_other_one_is_programmed() {
        let backend = Picky {
            poison: vec!["x/p17", "x/p300"],
            checks: RefCell::new(0),
            applied: RefCell::new(Vec::new()),
        };
        let ruleset = ruleset(500);
        let done = program_isolating(&backend, &mut None, &ruleset).unwrap();
        assert_eq!(
            done.refused.keys().collect::<Vec<_>>(),
            vec!["x/p17", "x/p300"]
        );
        assert_eq!(done.refused["x/p17"], "x/p17 is poison");
        // Bisection, not one check per endpoint.
        let checks = *backend.checks.borrow();
        assert!(checks <= 2 * 2 * 9 + 1, "{checks} checks");
        let applied = backend.applied.borrow();
        assert_eq!(applied.len(), 1);
        let script = &applied[0];
        assert_eq!(script.matches("comment ").count(), 2 * 498);
        assert!(script.contains(" of x/p16\"") && script.contains(" of x/p499\""));
        // The refused endpoints' addresses lead to drop.
        assert!(script.contains("10.0.0.18 : drop"), "{script}");
        assert_eq!(done.report.added.len(), 2 * 498 + 4);
    }

    #[test]
    fn a_refusal_no_endpoint_explains_stands_for_the_whole_transaction() {
        struct Never;
        impl NftBackend for Never {
            fn apply(&self, _: &str) -> Result<(), NftError> {
                Err(NftError::Refused("no".into()))
            }
            fn check(&self, _: &str) -> Result<(), NftError> {
                Ok(())
            }
            fn chains(&self) -> Result<Option<Vec<String>>, NftError> {
                Ok(None)
            }
            fn set_contents(
                &self,
                _: &crate::ruleset::AddressSet,
            ) -> Result<Option<Vec<ipnet::IpNet>>, NftError> {
                Ok(None)
            }
            fn sets(&self) -> Result<Option<Vec<String>>, NftError> {
                Ok(None)
            }
        }
        let error = program_isolating(&Never, &mut None, &ruleset(3)).unwrap_err();
        assert!(matches!(error, ProgramError::Nft(NftError::Refused(m)) if m == "no"));
    }
}
