//! The JSON form of endpoints and their policy lists: what `netpol acls --output json` writes
//! (the rules netpol computes per pod) and what `config/windows/Get-NetpolEndpointAcls.ps1` writes on a
//! node (every HCN endpoint with its whole policy list as HNS returns it). One form, so either
//! can be compared with the other.
//!
//! Reading is lenient where real files vary: a UTF-8 or UTF-16 byte-order mark (Windows
//! PowerShell 5.1 writes UTF-16 with `>`), HNS's own endpoint objects instead of the document
//! (`Get-HnsEndpoint | ConvertTo-Json -Depth 10`, one object or an array, V1 or V2 schema), V1
//! policies whose settings sit beside `Type` rather than under `Settings`, and `Settings` given
//! as a JSON string.

use std::net::IpAddr;

use netpol_hcn::schema::{EndpointPolicy, NETPOL_SET_PREFIX};
use netpol_hcn::HnsVersion;

pub use super::sets::LiveSets;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The `format` of the document.
pub const FORMAT: &str = "netpol.endpoint-acls/v1";

/// Endpoints and their policies.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Document {
    #[serde(default)]
    pub format: String,
    /// `netpol` (computed) or `hns` (read from a node).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// The node the endpoints were read on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// When they were read (RFC 3339), as the script writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_at: Option<String>,
    /// The HNS version (`"15.1"`), which decides what netpol compiles (no IPv6 rules before
    /// 11.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hns_version: Option<String>,
    pub endpoints: Vec<Endpoint>,
    /// The HNS networks of the endpoints with their policies as HNS returns them, of which
    /// netpol reads the IP sets (`SetPolicy`): read documents from a script that records them,
    /// and computed documents in IP-set form (one network, `id` `netpol`, holding the sets the
    /// rules name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<Network>,
}

/// One HNS network and its policies.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Network {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `{"Type": ..., "Settings": {...}}` each, kept as written.
    #[serde(default)]
    pub policies: Vec<Box<RawValue>>,
}

/// One endpoint (a pod's, computed; an HCN endpoint, read).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Endpoint {
    /// The HCN endpoint id (read documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The HCN endpoint name (read documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The pod, `namespace/name` (computed documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The id of the HNS network the endpoint is on (read documents; `HostComputeNetwork`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Computed documents: the rule counts and what the compiler did differently on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<RuleCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapstate_entries: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naive_rules: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The policy list: `{"Type": ..., "Settings": {...}}` each, kept as written.
    #[serde(default)]
    pub policies: Vec<Box<RawValue>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleCounts {
    pub total: usize,
    pub ingress: usize,
    pub egress: usize,
}

/// An endpoint as read, ready to compare.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveEndpoint {
    /// How the report names it: the id, else the name, else its position.
    pub label: String,
    pub id: Option<String>,
    pub name: Option<String>,
    pub pod: Option<String>,
    pub network: Option<String>,
    pub addresses: Vec<IpAddr>,
    pub policies: Vec<EndpointPolicy>,
}

/// A document as read, ready to compare.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveDocument {
    pub node: Option<String>,
    pub hns_version: Option<HnsVersion>,
    pub endpoints: Vec<LiveEndpoint>,
    /// The IP sets of the recorded networks; None when the file records no network (an older
    /// dump, `Get-HnsEndpoint` output), so set ids cannot be resolved.
    pub sets: Option<LiveSets>,
}

impl LiveDocument {
    /// Whether netpol named IP sets on this node: one of its ACLs names a `netpol-set-` id, or
    /// a recorded network holds one of its sets.
    pub fn shows_netpol_sets(&self) -> bool {
        let named = self.endpoints.iter().flat_map(|e| &e.policies).any(|p| {
            p.netpol_id().is_some()
                && p.as_acl().and_then(Result::ok).is_some_and(|acl| {
                    acl.remote_addresses.contains(NETPOL_SET_PREFIX)
                        || acl.local_addresses.contains(NETPOL_SET_PREFIX)
                })
        });
        named || self.sets.as_ref().is_some_and(LiveSets::holds_netpol_sets)
    }
}

/// Text from a file: UTF-8 (with or without a byte-order mark) or UTF-16 with one.
pub fn decode(bytes: &[u8]) -> Result<String, String> {
    let utf16 = |little: bool| -> Result<String, String> {
        if bytes.len() % 2 == 1 {
            return Err("UTF-16 text of an odd number of bytes".into());
        }
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|pair| {
                let pair = [pair[0], pair[1]];
                if little {
                    u16::from_le_bytes(pair)
                } else {
                    u16::from_be_bytes(pair)
                }
            })
            .collect();
        String::from_utf16(&units).map_err(|e| format!("not valid UTF-16: {e}"))
    };
    match bytes {
        [0xFF, 0xFE, ..] => utf16(true),
        [0xFE, 0xFF, ..] => utf16(false),
        [0xEF, 0xBB, 0xBF, rest @ ..] => {
            String::from_utf8(rest.to_vec()).map_err(|e| format!("not valid UTF-8: {e}"))
        }
        _ => String::from_utf8(bytes.to_vec()).map_err(|e| format!("not valid UTF-8: {e}")),
    }
}

/// Reads a document (or HNS's own endpoint objects). Errors name the endpoint and field.
pub fn read(text: &str) -> Result<LiveDocument, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    match value {
        Value::Object(object) if object.contains_key("endpoints") => {
            let document: Document = serde_json::from_value(Value::Object(object))
                .map_err(|e| format!("not a {FORMAT} document: {e}"))?;
            if !document.format.is_empty() && document.format != FORMAT {
                return Err(format!("format {:?} is not {FORMAT:?}", document.format));
            }
            let hns_version = document
                .hns_version
                .as_deref()
                .map(parse_version)
                .transpose()?;
            let endpoints = document
                .endpoints
                .into_iter()
                .enumerate()
                .map(|(i, e)| live_endpoint(i, e))
                .collect::<Result<_, _>>()?;
            let sets = if document.networks.is_empty() {
                None
            } else {
                Some(LiveSets::read(network_policies(&document.networks)?)?)
            };
            Ok(LiveDocument {
                node: document.node,
                hns_version,
                endpoints,
                sets,
            })
        }
        Value::Array(items) => hns_objects(items),
        Value::Object(object) if hns_id(&object).is_some() => {
            hns_objects(vec![Value::Object(object)])
        }
        _ => Err(format!(
            "neither a {FORMAT} document (an object with `endpoints`) nor HNS endpoint objects"
        )),
    }
}

/// Each network's id, its name in messages, and its policies parsed; errors name the network
/// and the policy.
#[allow(clippy::type_complexity)]
fn network_policies(
    networks: &[Network],
) -> Result<Vec<(Option<String>, String, Vec<EndpointPolicy>)>, String> {
    networks
        .iter()
        .enumerate()
        .map(|(n, network)| {
            let label = network
                .id
                .clone()
                .or_else(|| network.name.clone())
                .unwrap_or_else(|| format!("networks[{n}]"));
            let policies = network
                .policies
                .iter()
                .enumerate()
                .map(|(i, raw)| {
                    serde_json::from_str(raw.get())
                        .map_err(|e| e.to_string())
                        .and_then(policy)
                        .map_err(|e| format!("network {label}: policies[{i}]: {e}"))
                })
                .collect::<Result<_, _>>()?;
            Ok((network.id.clone(), label, policies))
        })
        .collect()
}

/// `"15.1"` (or `"15"`).
pub fn parse_version(text: &str) -> Result<HnsVersion, String> {
    let bad = || format!("hns_version {text:?} is not MAJOR.MINOR");
    let (major, minor) = text.trim().split_once('.').unwrap_or((text.trim(), "0"));
    Ok(HnsVersion::new(
        major.parse().map_err(|_| bad())?,
        minor.parse().map_err(|_| bad())?,
    ))
}

fn live_endpoint(index: usize, endpoint: Endpoint) -> Result<LiveEndpoint, String> {
    let label = endpoint
        .id
        .clone()
        .or_else(|| endpoint.pod.clone())
        .or_else(|| endpoint.name.clone())
        .unwrap_or_else(|| format!("endpoints[{index}]"));
    let addresses = endpoint
        .addresses
        .iter()
        .enumerate()
        .map(|(i, a)| {
            address(a)
                .ok_or_else(|| format!("endpoint {label}: addresses[{i}]: {a:?} is not an address"))
        })
        .collect::<Result<_, _>>()?;
    let policies = endpoint
        .policies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            serde_json::from_str(p.get())
                .map_err(|e| e.to_string())
                .and_then(policy)
                .map_err(|e| format!("endpoint {label}: policies[{i}]: {e}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(LiveEndpoint {
        label,
        id: endpoint.id,
        name: endpoint.name,
        pod: endpoint.pod,
        network: endpoint.network.map(|n| n.to_lowercase()),
        addresses,
        policies,
    })
}

/// An address, with or without a prefix length (`10.0.0.5/24` is the address 10.0.0.5).
fn address(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    text.split_once('/')
        .map_or(text, |(address, _)| address)
        .parse()
        .ok()
}

/// One policy: V2 `{"Type", "Settings": {...}}`, `Settings` as a JSON string, or V1 with the
/// settings beside `Type`.
fn policy(value: Value) -> Result<EndpointPolicy, String> {
    let Value::Object(mut object) = value else {
        return Err("not an object".into());
    };
    let policy_type = match object.remove("Type") {
        Some(Value::String(t)) => t,
        Some(other) => return Err(format!("Type {other} is not a string")),
        None => return Err("no Type".into()),
    };
    let settings = match object.remove("Settings") {
        Some(Value::String(text)) => {
            serde_json::from_str(&text).map_err(|e| format!("Settings is not JSON: {e}"))?
        }
        Some(settings) => settings,
        // V1: everything but Type is the settings.
        None => Value::Object(object),
    };
    Ok(EndpointPolicy::other(&policy_type, &settings))
}

fn hns_id(object: &Map<String, Value>) -> Option<&str> {
    ["ID", "Id", "id"]
        .iter()
        .find_map(|k| object.get(*k).and_then(Value::as_str))
}

/// HNS endpoint objects, V2 (`IpConfigurations`) or V1 (`IPAddress`, `IPv6Address`).
fn hns_objects(items: Vec<Value>) -> Result<LiveDocument, String> {
    let mut endpoints = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(object) = item else {
            return Err(format!("[{i}] is not an HNS endpoint object"));
        };
        let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
        let mut addresses = Vec::new();
        if let Some(Value::Array(configs)) = object.get("IpConfigurations") {
            addresses.extend(
                configs
                    .iter()
                    .filter_map(|c| c.get("IpAddress").and_then(Value::as_str))
                    .map(str::to_string),
            );
        }
        addresses.extend(["IPAddress", "IPv6Address"].iter().filter_map(|k| text(k)));
        let policies = match object.get("Policies") {
            Some(Value::Array(policies)) => policies.iter().collect(),
            Some(Value::Null) | None => Vec::new(),
            // PowerShell writes a one-element list as the element itself.
            Some(single) => vec![single],
        };
        let policies = policies
            .into_iter()
            .map(|p| serde_json::value::to_raw_value(p).expect("a JSON value serializes"))
            .collect();
        endpoints.push(live_endpoint(
            i,
            Endpoint {
                id: hns_id(&object).map(str::to_string),
                name: text("Name"),
                network: text("HostComputeNetwork").or_else(|| text("VirtualNetwork")),
                addresses: addresses.into_iter().filter(|a| !a.is_empty()).collect(),
                policies,
                ..Endpoint::default()
            },
        )?);
    }
    Ok(LiveDocument {
        node: None,
        hns_version: None,
        endpoints,
        sets: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn utf16_and_byte_order_marks_decode() {
        let text = r#"{"endpoints":[]}"#;
        let mut le = vec![0xFF, 0xFE];
        le.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(decode(&le).unwrap(), text);
        let mut be = vec![0xFE, 0xFF];
        be.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
        assert_eq!(decode(&be).unwrap(), text);
        let mut bom = vec![0xEF, 0xBB, 0xBF];
        bom.extend(text.as_bytes());
        assert_eq!(decode(&bom).unwrap(), text);
        assert!(decode(&[0xC3]).is_err());
    }

    #[test]
    fn v1_flat_and_string_settings_become_v2_policies() {
        let flat = policy(json!({"Type": "ACL", "Id": "a", "Action": "Allow", "Direction": "In"}))
            .unwrap();
        assert_eq!(flat.as_acl().unwrap().unwrap().id, "a");
        let string =
            policy(json!({"Type": "ACL", "Settings": "{\"Id\":\"b\",\"Action\":\"Block\",\"Direction\":\"Out\"}"}))
                .unwrap();
        assert_eq!(string.as_acl().unwrap().unwrap().id, "b");
        assert!(policy(json!({"Settings": {}}))
            .unwrap_err()
            .contains("no Type"));
    }

    #[test]
    fn hns_objects_of_either_schema_are_read() {
        let v2 = json!({"ID": "e1", "Name": "n1", "IpConfigurations": [{"IpAddress": "10.0.0.5", "PrefixLength": 24}], "Policies": []});
        let v1 = json!({"ID": "e2", "Name": "n2", "IPAddress": "10.0.0.6", "Policies": {"Type": "OutBoundNAT", "ExceptionList": ["10.0.0.0/8"]}});
        let doc = read(&json!([v2, v1]).to_string()).unwrap();
        assert_eq!(
            doc.endpoints[0].addresses,
            ["10.0.0.5".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(doc.endpoints[1].label, "e2");
        assert_eq!(doc.endpoints[1].policies.len(), 1);
        assert_eq!(doc.endpoints[1].policies[0].policy_type, "OutBoundNAT");
        let single = read(&json!({"ID": "e3", "IPAddress": "10.0.0.7"}).to_string()).unwrap();
        assert_eq!(single.endpoints.len(), 1);
    }

    #[test]
    fn bad_input_names_the_endpoint_and_field() {
        let bad_address = json!({"endpoints": [{"id": "e1", "addresses": ["10.0.0.999"]}]});
        assert_eq!(
            read(&bad_address.to_string()).unwrap_err(),
            "endpoint e1: addresses[0]: \"10.0.0.999\" is not an address"
        );
        let bad_policy = json!({"endpoints": [{"id": "e1", "policies": [{"Type": 7}]}]});
        assert!(read(&bad_policy.to_string())
            .unwrap_err()
            .starts_with("endpoint e1: policies[0]: Type 7"));
        let bad_version = json!({"hns_version": "fifteen", "endpoints": []});
        assert!(read(&bad_version.to_string())
            .unwrap_err()
            .contains("hns_version"));
        let wrong_format = json!({"format": "other/v9", "endpoints": []});
        assert!(read(&wrong_format.to_string())
            .unwrap_err()
            .contains("other/v9"));
        assert!(read("[1]").unwrap_err().contains("[0]"));
        assert!(read("{}").unwrap_err().contains("neither"));
    }
}
