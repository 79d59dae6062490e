//! The annotations netpol reads. Every other annotation is dropped as an object is read
//! (`prune`): they can be large and nothing reads them.

/// The annotation that puts one policy in audit mode (`enforce` or `audit`; see
/// `translate::enforcement`).
pub const ENFORCEMENT_ANNOTATION: &str = "netpol.io/enforcement";

/// Every annotation netpol reads.
pub const READ_ANNOTATIONS: [&str; 1] = [ENFORCEMENT_ANNOTATION];
