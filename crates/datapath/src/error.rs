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
    /// The datapath refused a policy request for a reason it named: retrying the same request
    /// is pointless, what to do depends on the [`Refusal`].
    #[error("{call} refused{}: {refusal}: {message}", endpoint_suffix(.endpoint))]
    Refused {
        call: &'static str,
        endpoint: Option<String>,
        refusal: Refusal,
        message: String,
    },
    /// The datapath returned something netpol cannot read.
    #[error("{call} returned unreadable JSON{}: {message}", endpoint_suffix(.endpoint))]
    BadResponse {
        call: &'static str,
        endpoint: Option<String>,
        message: String,
    },
}

/// Why a datapath refused a policy request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// A policy the request adds is there already (another writer, or a write whose answer was
    /// lost): read the list back and reconcile from it.
    AlreadyExists,
    /// A policy the request removes or names is not there: read back, the list is not as
    /// believed.
    PolicyNotFound,
    /// The datapath cannot take a policy of the request at all: the same request would be
    /// refused again, so it is not retried until what is wanted changes.
    InvalidPolicy,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::AlreadyExists => "a policy already exists",
            Refusal::PolicyNotFound => "a policy is not found",
            Refusal::InvalidPolicy => "a policy is invalid",
        })
    }
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

    /// Why the datapath refused the request, if it said.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            DatapathError::Refused { refusal, .. } => Some(*refusal),
            _ => None,
        }
    }
}
