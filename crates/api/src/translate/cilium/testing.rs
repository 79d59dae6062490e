//! Fixtures of the Cilium tests: a policy around a YAML body, and the pods the tests reach.

use netpol_engine::Identity;

use crate::translate::testing::pod;

/// A CiliumNetworkPolicy `c` in `namespace` with `body` (its `spec` or `specs`).
pub fn cnp(namespace: &str, body: &str) -> String {
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: c, namespace: {namespace}}}\n{body}"
    )
}

/// A CiliumClusterwideNetworkPolicy `cc` with `body`.
pub fn ccnp(body: &str) -> String {
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumClusterwideNetworkPolicy\nmetadata: {{name: cc}}\n{body}"
    )
}

/// Pods `a` and `b` of namespace `x`, and pods `a` of `y` and `z`.
pub fn xa() -> Identity {
    pod("x", "a", "10.1.0.11")
}
pub fn xb() -> Identity {
    pod("x", "b", "10.1.0.12")
}
pub fn ya() -> Identity {
    pod("y", "a", "10.1.1.11")
}
pub fn za() -> Identity {
    pod("z", "a", "10.1.2.11")
}
