//! HCN wire types, with the exact field names the HCN (HNS V2) JSON schema uses.
//!
//! Field names follow hcsshim's `hcn` package and the HNS schema. Empty strings and zero numbers
//! are omitted on the wire, as HCN itself does. Policies netpol does not understand (every type
//! other than `ACL`, and ACLs whose settings do not parse) are carried as raw JSON so that an
//! `Update`, which replaces an endpoint's whole policy list, sends them back byte-for-byte.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The `Id` prefix of every ACL netpol owns. Rules without it are never modified.
pub const NETPOL_ID_PREFIX: &str = "netpol-";

/// Protocol number HCN reads as "any protocol".
pub const PROTOCOL_ANY: &str = "256";

fn is_zero(n: &u16) -> bool {
    *n == 0
}

/// `Action` of an ACL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AclAction {
    Allow,
    /// Drops silently. netpol never rejects: denied traffic must time out.
    Block,
}

/// `Direction` of an ACL, seen from the endpoint: `In` is traffic the endpoint receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AclDirection {
    In,
    Out,
}

/// `RuleType`: the VFP layer a rule lives in. NetworkPolicy enforcers use `Switch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RuleType {
    Switch,
    Host,
}

/// The `Settings` of an `ACL` endpoint policy. Lists are comma-separated strings; ports may be
/// `a-b` ranges. A missing address or port field matches anything.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AclPolicySetting {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// A protocol number, `"256"` for any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocols: String,
    pub action: AclAction,
    pub direction: AclDirection,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub local_addresses: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub remote_addresses: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub local_ports: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub remote_ports: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_type: Option<RuleType>,
    /// Lower numbers are evaluated first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: u16,
}

impl AclPolicySetting {
    pub fn is_netpol_owned(&self) -> bool {
        self.id.starts_with(NETPOL_ID_PREFIX)
    }
}

/// The policy `Type` that carries ACL settings.
pub const ACL_POLICY_TYPE: &str = "ACL";

/// One entry of an endpoint's `Policies`: `{"Type": ..., "Settings": {...}}`. `Settings` is kept
/// as the raw JSON text, so a read-modify-write sends other owners' policies back byte-for-byte.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EndpointPolicy {
    #[serde(rename = "Type")]
    pub policy_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Box<RawValue>>,
}

impl PartialEq for EndpointPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.policy_type == other.policy_type
            && self.settings.as_ref().map(|s| s.get()) == other.settings.as_ref().map(|s| s.get())
    }
}

/// Just the `Id` of a policy's settings.
#[derive(Deserialize)]
struct IdOnly {
    #[serde(rename = "Id", default)]
    id: Option<String>,
}

impl EndpointPolicy {
    /// Wraps ACL settings in the policy envelope.
    pub fn acl(settings: &AclPolicySetting) -> Self {
        let text = serde_json::to_string(settings).expect("ACL settings serialize to JSON");
        EndpointPolicy {
            policy_type: ACL_POLICY_TYPE.to_string(),
            settings: Some(RawValue::from_string(text).expect("serde_json output is valid JSON")),
        }
    }

    /// A policy of any type with the given settings.
    pub fn other(policy_type: &str, settings: &Value) -> Self {
        EndpointPolicy {
            policy_type: policy_type.to_string(),
            settings: Some(
                serde_json::value::to_raw_value(settings).expect("a JSON value serializes"),
            ),
        }
    }

    pub fn settings_text(&self) -> &str {
        self.settings.as_ref().map_or("null", |s| s.get())
    }

    /// The ACL settings, if this is an ACL policy; an error if its settings do not parse.
    pub fn as_acl(&self) -> Option<Result<AclPolicySetting, serde_json::Error>> {
        (self.policy_type == ACL_POLICY_TYPE).then(|| serde_json::from_str(self.settings_text()))
    }

    /// Whether netpol owns this policy: an ACL whose `Id` carries the netpol prefix. Decided from
    /// the `Id` alone, so a netpol rule HCN returns with unexpected fields is still recognised
    /// (and replaced) rather than kept forever.
    pub fn netpol_id(&self) -> Option<String> {
        if self.policy_type != ACL_POLICY_TYPE {
            return None;
        }
        serde_json::from_str::<IdOnly>(self.settings_text())
            .ok()?
            .id
            .filter(|id| id.starts_with(NETPOL_ID_PREFIX))
    }
}

/// The `Id` prefix of every network IP set netpol owns. Sets without it are never modified.
pub const NETPOL_SET_PREFIX: &str = "netpol-set-";

/// The network policy `Type` that carries an IP set (hcsshim's `hcn.SetPolicy`).
pub const SET_POLICY_TYPE: &str = "SetPolicy";

/// `PolicyType` of a set policy: `IPSET` holds addresses; `NESTEDIPSET` (sets of sets, which
/// Azure NPM uses for namespace lists) netpol does not need.
pub const IPSET: &str = "IPSET";

/// The `Settings` of a network `SetPolicy` (hcsshim's `SetPolicySetting`): an IP set on the
/// network that ACLs of the network's endpoints name by `Id` in `RemoteAddresses`. `Values` is
/// comma-separated addresses and CIDRs, as an ACL's address list.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SetPolicySetting {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(rename = "PolicyType", default)]
    pub policy_type: String,
    #[serde(default)]
    pub values: String,
}

impl SetPolicySetting {
    pub fn is_netpol_owned(&self) -> bool {
        self.id.starts_with(NETPOL_SET_PREFIX)
    }

    /// The set's members (see [`set_members`]).
    pub fn members(&self) -> Result<Vec<ipnet::IpNet>, String> {
        set_members(&self.values)
    }
}

/// A set's `Values`: addresses and CIDRs, comma-separated; empty is an empty set. An error names
/// the first item that is neither.
pub fn set_members(values: &str) -> Result<Vec<ipnet::IpNet>, String> {
    values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(crate::addresses::parse_item)
        .collect()
}

impl EndpointPolicy {
    /// Wraps set settings in the network policy envelope.
    pub fn set(settings: &SetPolicySetting) -> Self {
        EndpointPolicy::other(
            SET_POLICY_TYPE,
            &serde_json::to_value(settings).expect("set settings serialize to JSON"),
        )
    }

    /// The set settings, if this is a set policy; an error if its settings do not parse.
    pub fn as_set(&self) -> Option<Result<SetPolicySetting, serde_json::Error>> {
        (self.policy_type == SET_POLICY_TYPE).then(|| serde_json::from_str(self.settings_text()))
    }
}

/// The properties `HcnQueryNetworkProperties` returns: only the policies are typed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetworkProperties {
    #[serde(rename = "ID", default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(rename = "Name", default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(rename = "Policies", default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<EndpointPolicy>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The document passed to `HcnModifyNetwork` for policies: hcsshim's
/// `ModifyNetworkSettingRequest` with a `PolicyNetworkRequest`, which has the endpoint request's
/// shape (`ResourceType` `Policy`, `RequestType`, `Settings.Policies`). `Add` creates sets,
/// `Update` replaces the values of existing ones, `Remove` deletes them.
pub type ModifyNetworkRequest = ModifyEndpointRequest;

/// `ResourceType` of a modify request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResourceType {
    Policy,
}

/// `RequestType` of a modify request. `Add` appends the given policies and `Remove` takes away
/// those equal to the given ones, leaving every other policy alone; `Update` replaces the
/// endpoint's whole policy list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestType {
    Add,
    Remove,
    Update,
    Refresh,
}

/// `Settings` of a policy modify request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PolicyEndpointRequest {
    #[serde(default)]
    pub policies: Vec<EndpointPolicy>,
}

/// The JSON document passed to `HcnModifyEndpoint`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ModifyEndpointRequest {
    pub resource_type: ResourceType,
    pub request_type: RequestType,
    pub settings: PolicyEndpointRequest,
}

impl ModifyEndpointRequest {
    /// A policy request of `request_type` carrying `policies`.
    pub fn new(request_type: RequestType, policies: Vec<EndpointPolicy>) -> Self {
        ModifyEndpointRequest {
            resource_type: ResourceType::Policy,
            request_type,
            settings: PolicyEndpointRequest { policies },
        }
    }

    /// An `Update` that makes `policies` the endpoint's complete policy list.
    pub fn update(policies: Vec<EndpointPolicy>) -> Self {
        ModifyEndpointRequest::new(RequestType::Update, policies)
    }
}

/// `SchemaVersion` of a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SchemaVersion {
    pub major: u32,
    pub minor: u32,
}

/// The query document of `HcnEnumerateEndpoints` and `HcnQueryEndpointProperties`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HostComputeQuery {
    pub schema_version: SchemaVersion,
    pub flags: u32,
    /// A JSON object serialized into a string, e.g. `{"Name":"..."}`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub filter: String,
}

impl Default for HostComputeQuery {
    /// The V2 schema query with no filter and no flags, which lists everything.
    fn default() -> Self {
        HostComputeQuery {
            schema_version: SchemaVersion { major: 2, minor: 0 },
            flags: 0,
            filter: String::new(),
        }
    }
}

/// One of an endpoint's `IpConfigurations`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IpConfig {
    pub ip_address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_length: Option<u8>,
}

/// The properties `HcnQueryEndpointProperties` returns. Only the fields netpol reads are typed;
/// the rest is kept in `other`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointProperties {
    #[serde(rename = "ID")]
    pub id: String,
    #[serde(rename = "Name", default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(
        rename = "IpConfigurations",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ip_configurations: Vec<IpConfig>,
    #[serde(rename = "Policies", default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<EndpointPolicy>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The envelope of a V1 `HNSCall` response, used for the globals (version) query.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HnsResponse {
    #[serde(default)]
    pub success: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub output: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample_acl() -> AclPolicySetting {
        AclPolicySetting {
            id: "netpol-0123456789abcdef".into(),
            protocols: "6".into(),
            action: AclAction::Allow,
            direction: AclDirection::In,
            local_addresses: String::new(),
            remote_addresses: "10.1.0.11,10.2.0.0/16".into(),
            local_ports: "80,8000-8080".into(),
            remote_ports: String::new(),
            rule_type: Some(RuleType::Switch),
            priority: 1001,
        }
    }

    #[test]
    fn acl_settings_golden() {
        let text = serde_json::to_string(&sample_acl()).unwrap();
        assert_eq!(
            text,
            r#"{"Id":"netpol-0123456789abcdef","Protocols":"6","Action":"Allow","Direction":"In","RemoteAddresses":"10.1.0.11,10.2.0.0/16","LocalPorts":"80,8000-8080","RuleType":"Switch","Priority":1001}"#
        );
        let back: AclPolicySetting = serde_json::from_str(&text).unwrap();
        assert_eq!(back, sample_acl());
    }

    #[test]
    fn empty_fields_are_omitted() {
        let acl = AclPolicySetting {
            id: String::new(),
            protocols: String::new(),
            action: AclAction::Block,
            direction: AclDirection::Out,
            local_addresses: String::new(),
            remote_addresses: String::new(),
            local_ports: String::new(),
            remote_ports: String::new(),
            rule_type: None,
            priority: 0,
        };
        assert_eq!(
            serde_json::to_string(&acl).unwrap(),
            r#"{"Action":"Block","Direction":"Out"}"#
        );
    }

    #[test]
    fn modify_request_golden() {
        let other = EndpointPolicy::other(
            "OutBoundNAT",
            &json!({"Exceptions": ["10.0.0.0/8"], "VirtualIP": "10.0.0.4"}),
        );
        let request =
            ModifyEndpointRequest::update(vec![other, EndpointPolicy::acl(&sample_acl())]);
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"ResourceType":"Policy","RequestType":"Update","Settings":{"Policies":["#,
                r#"{"Type":"OutBoundNAT","Settings":{"Exceptions":["10.0.0.0/8"],"VirtualIP":"10.0.0.4"}},"#,
                r#"{"Type":"ACL","Settings":{"Id":"netpol-0123456789abcdef","Protocols":"6","Action":"Allow","Direction":"In","RemoteAddresses":"10.1.0.11,10.2.0.0/16","LocalPorts":"80,8000-8080","RuleType":"Switch","Priority":1001}}"#,
                r#"]}}"#
            )
        );
        assert_eq!(
            serde_json::from_str::<ModifyEndpointRequest>(&text).unwrap(),
            request
        );
    }

    #[test]
    fn query_golden() {
        assert_eq!(
            serde_json::to_string(&HostComputeQuery::default()).unwrap(),
            r#"{"SchemaVersion":{"Major":2,"Minor":0},"Flags":0}"#
        );
        let filtered = HostComputeQuery {
            filter: r#"{"Name":"ep"}"#.into(),
            ..HostComputeQuery::default()
        };
        assert_eq!(
            serde_json::to_string(&filtered).unwrap(),
            r#"{"SchemaVersion":{"Major":2,"Minor":0},"Flags":0,"Filter":"{\"Name\":\"ep\"}"}"#
        );
    }

    #[test]
    fn endpoint_properties_keep_unknown_fields_and_foreign_policies() {
        let text = json!({
            "ID": "4a3c1f7e-0000-4000-8000-000000000001",
            "Name": "pod-a_eth0",
            "HostComputeNetwork": "c0ffee00-0000-4000-8000-000000000000",
            "IpConfigurations": [{"IpAddress": "10.1.0.11", "PrefixLength": 24}],
            "Policies": [
                {"Type": "ACL", "Settings": {"Action": "Allow", "Direction": "In", "Priority": 100, "Vendor": "x"}},
                {"Type": "L2Driver", "Settings": {"Foo": 1}}
            ],
            "SchemaVersion": {"Major": 2, "Minor": 16}
        });
        let props: EndpointProperties = serde_json::from_value(text.clone()).unwrap();
        assert_eq!(props.ip_configurations[0].ip_address, "10.1.0.11");
        assert_eq!(props.policies.len(), 2);
        assert!(props.policies.iter().all(|p| p.netpol_id().is_none()));
        assert!(props.other.contains_key("HostComputeNetwork"));
        assert_eq!(serde_json::to_value(&props).unwrap(), text);
        // Foreign settings go back exactly as they came, field order included.
        let raw = r#"{"Type":"L2Driver","Settings":{"Zed":1,"Alpha":[2, 3]}}"#;
        let policy: EndpointPolicy = serde_json::from_str(raw).unwrap();
        assert_eq!(serde_json::to_string(&policy).unwrap(), raw);
    }

    #[test]
    fn ownership_is_decided_by_the_id_prefix() {
        let owned = EndpointPolicy::acl(&sample_acl());
        assert_eq!(
            owned.netpol_id().as_deref(),
            Some("netpol-0123456789abcdef")
        );
        let mut foreign = sample_acl();
        foreign.id = "azure-acl-1".into();
        assert_eq!(EndpointPolicy::acl(&foreign).netpol_id(), None);
        let not_acl = EndpointPolicy::other("OutBoundNAT", &json!({"Id": "netpol-x"}));
        assert_eq!(not_acl.netpol_id(), None);
    }

    #[test]
    fn set_policy_golden() {
        let set = SetPolicySetting {
            id: "netpol-set-0123456789abcdef".into(),
            name: "netpol-set-0123456789abcdef".into(),
            policy_type: IPSET.into(),
            values: "10.1.0.11,10.2.0.0/16".into(),
        };
        let request = ModifyNetworkRequest::new(RequestType::Add, vec![EndpointPolicy::set(&set)]);
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"ResourceType":"Policy","RequestType":"Add","Settings":{"Policies":["#,
                r#"{"Type":"SetPolicy","Settings":{"Id":"netpol-set-0123456789abcdef","Name":"netpol-set-0123456789abcdef","PolicyType":"IPSET","Values":"10.1.0.11,10.2.0.0/16"}}"#,
                r#"]}}"#
            )
        );
        let back: ModifyNetworkRequest = serde_json::from_str(&text).unwrap();
        assert_eq!(back.settings.policies[0].as_set().unwrap().unwrap(), set);
    }

    #[test]
    fn hns_version_response_parses() {
        let r: HnsResponse =
            serde_json::from_str(r#"{"Success":true,"Output":{"Major":13,"Minor":2}}"#).unwrap();
        assert!(r.success);
        assert_eq!(r.output["Major"], 13);
    }
}
