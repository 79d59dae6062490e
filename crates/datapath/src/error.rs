//! A failed datapath call, in terms every datapath shares.

/// A failed datapath call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DatapathError {
    /// The endpoint does not exist (any more). HCN endpoints never come back under the same id.
    #[error("endpoint {endpoint} not found")]
    NotFound { endpoint: String },
    /// The datapath refused the call or it failed; worth retrying.
    #[error("{call} failed{}: {message}", endpoint_suffix(.endpoint))]
    Call {
        call: &'static str,
        endpoint: Option<String>,
        message: String,
    },
    /// The connection to the service behind the datapath is gone (HNS restarted): the client
    /// must be re-created, and every endpoint read again.
    #[error("{call} failed: the datapath service restarted; the client must reconnect")]
    Disconnected { call: &'static str },
    /// The datapath returned something netpol cannot read.
    #[error("{call} returned unreadable JSON{}: {message}", endpoint_suffix(.endpoint))]
    BadResponse {
        call: &'static str,
        endpoint: Option<String>,
        message: String,
    },
}

fn endpoint_suffix(endpoint: &Option<String>) -> String {
    endpoint
        .as_ref()
        .map_or_else(String::new, |e| format!(" for endpoint {e}"))
}

impl DatapathError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, DatapathError::NotFound { .. })
    }

    pub fn is_disconnected(&self) -> bool {
        matches!(self, DatapathError::Disconnected { .. })
    }
}
