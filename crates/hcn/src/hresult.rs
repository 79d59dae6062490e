//! What the HRESULT of a failed HCN call means for netpol: the object is gone, HNS itself is gone
//! (stopped, restarting, or its RPC endpoint dead), or anything else. A pure function, compiled
//! on every platform, so the mapping is tested where CI runs; the Windows client applies it to
//! every failed call.
//!
//! - **Gone** ([`HcnFailure::NotFound`]): the endpoint (or its network) no longer exists. HCN
//!   endpoint ids are never reused, so the endpoint is reported gone and never retried.
//! - **Unavailable** ([`HcnFailure::Unavailable`]): HNS is not answering. Nothing about the
//!   object is known; the client is re-created once HNS answers again, and every endpoint is read
//!   back then, because a restarted HNS may have dropped every policy.
//! - **Policy refusals** ([`HcnFailure::Policy`]): `HCN_E_POLICY_ALREADY_EXISTS` (read the list
//!   back and reconcile), `HCN_E_POLICY_NOT_FOUND` (re-read: the list is not as believed) and
//!   `HCN_E_INVALID_POLICY` (HNS cannot take the policy: refused, not retried as if transient).
//!   Codes from hcsshim's `hcn/hcnerrors.go`.
//! - **Other** ([`HcnFailure::Other`]): a failure netpol cannot classify: retried with backoff,
//!   the message kept for the log.
//!
//! Codes arrive as full HRESULTs (`0x800706BA`) from the `windows` crate; Go tools (hcsshim,
//! kube-proxy) log the same codes with facility 7 stripped (`0x6ba`), so a bare Win32 code is
//! read as the HRESULT it stands for.

/// How netpol treats a failed HCN call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HcnFailure {
    /// The object (or its network) does not exist.
    NotFound,
    /// HNS is stopped, restarting or unreachable: the client must reconnect.
    Unavailable,
    /// HNS refused a policy request, saying why.
    Policy(netpol_datapath::Refusal),
    /// Any other failure.
    Other,
}

/// `HRESULT_FROM_WIN32(code)`.
const fn from_win32(code: u32) -> u32 {
    0x8007_0000 | code
}

/// HCN's own facility (0x3B): `HCN_E_*`.
const fn hcn(code: u32) -> u32 {
    0x803B_0000 | code
}

/// Codes that mean the object is gone.
const NOT_FOUND: [(u32, &str); 4] = [
    (hcn(0x01), "HCN_E_NETWORK_NOT_FOUND"),
    (hcn(0x02), "HCN_E_ENDPOINT_NOT_FOUND"),
    (from_win32(2), "ERROR_FILE_NOT_FOUND"),
    (from_win32(1168), "ERROR_NOT_FOUND"),
];

/// Codes that mean HNS is not answering: its RPC server is gone or restarting, the service is
/// stopped or stopping, or a handle belongs to an HNS instance that no longer runs.
const UNAVAILABLE: [(u32, &str); 17] = [
    (
        from_win32(6),
        "ERROR_INVALID_HANDLE (a handle of an HNS that restarted)",
    ),
    (from_win32(1060), "ERROR_SERVICE_DOES_NOT_EXIST"),
    (from_win32(1062), "ERROR_SERVICE_NOT_ACTIVE"),
    (from_win32(1070), "ERROR_SERVICE_START_HANG"),
    (from_win32(1115), "ERROR_SHUTDOWN_IN_PROGRESS"),
    (from_win32(1717), "RPC_S_UNKNOWN_IF"),
    (from_win32(1722), "RPC_S_SERVER_UNAVAILABLE"),
    (from_win32(1723), "RPC_S_SERVER_TOO_BUSY"),
    (from_win32(1726), "RPC_S_CALL_FAILED"),
    (from_win32(1727), "RPC_S_CALL_FAILED_DNE"),
    (from_win32(1753), "EPT_S_NOT_REGISTERED"),
    (from_win32(1775), "RPC_X_SS_IN_NULL_CONTEXT"),
    (0x8001_0007, "RPC_E_SERVER_DIED"),
    (0x8001_0012, "RPC_E_SERVER_DIED_DNE"),
    (0x8001_0108, "RPC_E_DISCONNECTED"),
    (hcn(0x20), "HCN_E_MANAGER_STOPPED"),
    (hcn(0x31), "HCN_E_OBJECT_USED_AFTER_UNLOAD"),
];

/// Codes that refuse a policy request, and what each means for netpol.
const POLICY: [(u32, &str, netpol_datapath::Refusal); 3] = [
    (
        hcn(0x12),
        "HCN_E_POLICY_ALREADY_EXISTS",
        netpol_datapath::Refusal::AlreadyExists,
    ),
    (
        hcn(0x08),
        "HCN_E_POLICY_NOT_FOUND",
        netpol_datapath::Refusal::PolicyNotFound,
    ),
    (
        hcn(0x0D),
        "HCN_E_INVALID_POLICY",
        netpol_datapath::Refusal::InvalidPolicy,
    ),
];

/// The HRESULT a code stands for: itself, or a bare Win32 code (facility stripped) as
/// `HRESULT_FROM_WIN32`.
fn as_hresult(code: u32) -> u32 {
    if code != 0 && code <= 0xFFFF {
        from_win32(code)
    } else {
        code
    }
}

/// How netpol treats a call that failed with `code` (an HRESULT, or a bare Win32 error code).
pub fn classify(code: u32) -> HcnFailure {
    let code = as_hresult(code);
    if NOT_FOUND.iter().any(|(c, _)| *c == code) {
        HcnFailure::NotFound
    } else if UNAVAILABLE.iter().any(|(c, _)| *c == code) {
        HcnFailure::Unavailable
    } else if let Some((_, _, refusal)) = POLICY.iter().find(|(c, _, _)| *c == code) {
        HcnFailure::Policy(*refusal)
    } else {
        HcnFailure::Other
    }
}

/// The symbolic name of a code netpol classifies, for logs (`RPC_S_SERVER_UNAVAILABLE`).
pub fn name(code: u32) -> Option<&'static str> {
    let code = as_hresult(code);
    NOT_FOUND
        .iter()
        .chain(UNAVAILABLE.iter())
        .find(|(c, _)| *c == code)
        .map(|(_, name)| *name)
        .or_else(|| {
            POLICY
                .iter()
                .find(|(c, _, _)| *c == code)
                .map(|(_, name, _)| *name)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_or_restarting_hns_is_unavailable() {
        for code in [
            0x8007_06BA, // RPC server unavailable: HNS stopped
            0x8007_06BE, // RPC call failed: HNS died mid-call
            0x8007_06BF,
            0x8007_0006, // invalid handle: a handle of the previous HNS instance
            0x8007_0426, // the service has not been started
            0x8007_045B,
            0x8001_0108,
            0x803B_0020, // HCN manager stopping
            0x803B_0031,
        ] {
            assert_eq!(classify(code), HcnFailure::Unavailable, "{code:#x}");
        }
    }

    #[test]
    fn facility_stripped_codes_as_go_tools_log_them_classify_alike() {
        assert_eq!(classify(0x6BA), HcnFailure::Unavailable);
        assert_eq!(classify(0x6BE), HcnFailure::Unavailable);
        assert_eq!(classify(0x426), HcnFailure::Unavailable);
        assert_eq!(classify(0x490), HcnFailure::NotFound);
        assert_eq!(name(0x6BA), Some("RPC_S_SERVER_UNAVAILABLE"));
        assert_eq!(name(0x8007_06BA), Some("RPC_S_SERVER_UNAVAILABLE"));
    }

    #[test]
    fn a_missing_endpoint_or_network_is_not_found() {
        assert_eq!(classify(0x803B_0002), HcnFailure::NotFound);
        assert_eq!(classify(0x803B_0001), HcnFailure::NotFound);
        assert_eq!(classify(0x8007_0490), HcnFailure::NotFound);
    }

    #[test]
    fn refusals_and_unknown_codes_are_other_failures() {
        for code in [
            0x803B_001B, // invalid JSON
            0x803B_0007, // switch port not found
            0x8007_0005, // access denied
            0x8000_4005, // E_FAIL
            0,
        ] {
            assert_eq!(classify(code), HcnFailure::Other, "{code:#x}");
        }
        assert_eq!(name(0x803B_001B), None);
    }

    #[test]
    fn policy_refusals_say_what_to_do() {
        use netpol_datapath::Refusal;
        assert_eq!(
            classify(0x803B_0012),
            HcnFailure::Policy(Refusal::AlreadyExists)
        );
        assert_eq!(
            classify(0x803B_0008),
            HcnFailure::Policy(Refusal::PolicyNotFound)
        );
        // Never "HNS restarted", never a transient failure to retry as is.
        assert_eq!(
            classify(0x803B_000D),
            HcnFailure::Policy(Refusal::InvalidPolicy)
        );
        assert_eq!(name(0x803B_000D), Some("HCN_E_INVALID_POLICY"));
    }
}
