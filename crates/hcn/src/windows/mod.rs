//! The HCN client: the raw `computenetwork.dll` calls behind [`HcnCalls`]. Only the FFI lives
//! here; building requests, parsing responses and classifying errors are shared with the
//! simulator in [`crate::client`], and everything above that in [`crate::programmer`].
//!
//! - The libraries are loaded at run time by [`library`], so the executable starts (and every
//!   other command runs) on hosts without HNS; [`HcnClient::connect`] says why it cannot run
//!   where they are missing.
//! - Every call blocks and may take seconds under load. The agent makes them from its reconcile
//!   thread (through [`HcnDatapath`](crate::client::HcnDatapath)), never on its async runtime.
//! - Every output string and every error record HCN allocates is freed with `CoTaskMemFree`,
//!   on success and on failure alike; endpoint handles are opened per call and closed by a guard.
//! - A failed call's HRESULT is classified by [`crate::hresult`]: a dead or restarting HNS
//!   (RPC server unavailable, call failed, invalid handle, service not running) is
//!   [`RawError::Disconnected`], which makes the agent reconnect and re-read every endpoint.
//! - The HNS version comes from the V1 globals query (`HNSCall GET /globals/version` in
//!   `vmcompute.dll`; there is no `HcnQueryGlobals`). [`Capabilities::of`] refuses an HNS without
//!   the V2 API or ACL lists and ranges.
//! - IP sets (`SetPolicy` of type `IPSET`) live on a network, not an endpoint: they are read
//!   with `HcnQueryNetworkProperties` and written with `HcnModifyNetwork` (hcsshim's
//!   `HostComputeNetwork.AddPolicy`/`RemovePolicy`, a `ModifyNetworkSettingRequest` with a
//!   `PolicyNetworkRequest`), on the network [`HcnDatapath`](crate::client::HcnDatapath) found the
//!   endpoints on (`HostComputeNetwork`), opened per call by GUID like endpoints.
//!   [`Capabilities::ip_sets`] is set where the HNS version has them ([`HnsVersion::SET_POLICY`]).
//! - A restart is noticed two ways, both raising the client's [`ResyncSignal`]: the
//!   service-disconnect callback (`HcnRegisterServiceCallback`), when HNS accepts it, and a
//!   [`RestartWatch`] polling the `hns` service's process every [`POLL_INTERVAL`], which also
//!   covers a refused registration and a restart between two calls (handles are per call, so
//!   no call fails afterwards). A restarted HNS forgets the registration: the agent builds a new
//!   client with [`HcnClient::connect`].

pub mod library;
pub mod service;

use std::ffi::c_void;
use std::sync::Arc;

use windows::core::{GUID, HRESULT, HSTRING, PCWSTR, PWSTR};
use windows::Win32::System::Com::CoTaskMemFree;

use crate::client::{HcnCalls, RawError};
use crate::hresult::{self, HcnFailure};
use crate::restart::{RestartPoller, RestartWatch, POLL_INTERVAL};
use crate::resync::ResyncSignal;
use crate::schema::HnsResponse;
use crate::version::{Capabilities, HnsVersion, Unsupported};
use library::{Hcn, LoadError, NOTIFICATION_SERVICE_DISCONNECT};

/// Why the client could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("reading the HNS version failed: {0}")]
    Version(String),
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
}

/// The registration of the service callback, unregistered on drop.
struct CallbackHandle {
    handle: *mut c_void,
    unregister: library::UnregisterFn,
}

// SAFETY: the handle is an opaque token HCN hands out; it is only passed back to
// HcnUnregisterServiceCallback, once, from Drop. HCN does not tie it to a thread.
unsafe impl Send for CallbackHandle {}
// SAFETY: as above; no method reads it through a shared reference.
unsafe impl Sync for CallbackHandle {}

impl Drop for CallbackHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from HcnRegisterServiceCallback and is unregistered once.
        let result = unsafe { (self.unregister)(self.handle) };
        if let Err(e) = result.ok() {
            tracing::warn!(error = %e, "unregistering the HNS service callback failed");
        }
    }
}

/// The HCN client.
pub struct HcnClient {
    hcn: &'static Hcn,
    capabilities: Capabilities,
    // Declared before `resync` so that both stop using the signal before it is dropped.
    callback: Option<CallbackHandle>,
    _watch: RestartWatch,
    resync: Arc<ResyncSignal>,
}

impl std::fmt::Debug for HcnClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HcnClient")
            .field("capabilities", &self.capabilities)
            .field("disconnect_callback", &self.callback.is_some())
            .finish()
    }
}

impl HcnClient {
    /// Loads the HCN libraries, reads the HNS version, refuses an HNS netpol cannot program,
    /// registers for service-disconnect notifications and starts the restart watch. Blocks.
    pub fn connect() -> Result<HcnClient, ConnectError> {
        let hcn = library::hcn()?;
        let version = hns_version(hcn).map_err(ConnectError::Version)?;
        let capabilities = Capabilities::of(version).inspect_err(|e| {
            tracing::error!(hns_version = %version, "{e}; netpol cannot program this host");
        })?;
        // This client makes the network calls IP sets need; the version decides the rest.
        let capabilities = capabilities.with_ip_sets(true);
        tracing::info!(
            hns_version = %version,
            dual_stack = capabilities.dual_stack,
            ip_sets = capabilities.ip_sets,
            "connected to HNS"
        );
        let resync = Arc::new(ResyncSignal::default());
        let callback = register_disconnect_callback(hcn, &resync);
        let poller = RestartPoller::new(Box::new(service::hns_service_state), &resync);
        Ok(HcnClient {
            hcn,
            capabilities,
            callback,
            _watch: RestartWatch::spawn(poller, POLL_INTERVAL),
            resync,
        })
    }
}

/// Called by HCN on its own thread. Must not unwind into HCN.
unsafe extern "system" fn on_service_notification(
    notification_type: u32,
    context: *const c_void,
    _status: HRESULT,
    _data: PCWSTR,
) {
    if notification_type != NOTIFICATION_SERVICE_DISCONNECT || context.is_null() {
        return;
    }
    // SAFETY: `context` is the `ResyncSignal` the registering client keeps alive (in an Arc)
    // until after it unregisters this callback.
    let signal = unsafe { &*(context as *const ResyncSignal) };
    let raised = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| signal.raise()));
    if raised.is_err() {
        tracing::error!("a resync listener panicked in the HNS notification callback");
    }
    tracing::warn!("HNS service disconnected; every endpoint will be re-read");
}

fn register_disconnect_callback(
    hcn: &'static Hcn,
    signal: &Arc<ResyncSignal>,
) -> Option<CallbackHandle> {
    let mut handle: *mut c_void = std::ptr::null_mut();
    let context = Arc::as_ptr(signal) as *const c_void;
    // SAFETY: the callback only dereferences `context` while the client (which owns an Arc of
    // the signal) is alive; the client drops the registration first.
    let result = unsafe {
        (hcn.register_service_callback)(Some(on_service_notification), context, &mut handle)
    };
    match result.ok() {
        Ok(()) => Some(CallbackHandle {
            handle,
            unregister: hcn.unregister_service_callback,
        }),
        Err(e) => {
            tracing::warn!(error = %e, "cannot register for HNS disconnect notifications; restarts are noticed by polling the hns service");
            None
        }
    }
}

/// Takes ownership of a CoTaskMemAlloc'd wide string: reads it and frees it.
///
/// # Safety
/// `p` is null or a NUL-terminated wide string allocated with CoTaskMemAlloc that nothing else
/// frees.
unsafe fn take_string(p: PWSTR) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: per the contract, `p` is a valid NUL-terminated wide string.
    let text = unsafe { p.to_string() }.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "HCN returned a string that is not valid UTF-16");
        String::new()
    });
    // SAFETY: allocated with CoTaskMemAlloc and owned by us; freed exactly once.
    unsafe { CoTaskMemFree(Some(p.0 as *const c_void)) };
    Some(text)
}

/// The [`RawError`] of a failed call, by its HRESULT.
fn raw_error(call: &str, result: HRESULT, record: Option<String>) -> RawError {
    let code = result.0 as u32;
    match hresult::classify(code) {
        HcnFailure::NotFound => RawError::NotFound,
        HcnFailure::Unavailable => {
            tracing::warn!(
                call,
                code = format_args!("{code:#010x}"),
                name = hresult::name(code).unwrap_or("?"),
                "HNS is not answering"
            );
            RawError::Disconnected
        }
        failure @ (HcnFailure::Policy(_) | HcnFailure::Other) => {
            let message = result.message();
            let name = hresult::name(code).unwrap_or("");
            let message = match record.filter(|r| !r.is_empty()) {
                Some(r) => format!("{call}: {code:#010x} {name} {message}: {r}"),
                None => format!("{call}: {code:#010x} {name} {message}"),
            };
            match failure {
                HcnFailure::Policy(refusal) => RawError::Refused { refusal, message },
                _ => RawError::Failed { message },
            }
        }
    }
}

/// The call's outcome: its HRESULT, failing also on a non-empty error record (as hcsshim does).
fn check(call: &str, result: HRESULT, record: Option<String>) -> Result<(), RawError> {
    if result.is_err() {
        return Err(raw_error(call, result, record));
    }
    match record.filter(|r| !r.trim().is_empty()) {
        Some(record) if !record_says_success(&record) => Err(RawError::Failed {
            message: format!("{call}: {record}"),
        }),
        _ => Ok(()),
    }
}

/// Whether an error record is HCN's `{"Success":true}`.
fn record_says_success(record: &str) -> bool {
    serde_json::from_str::<HnsResponse>(record).is_ok_and(|r| r.success)
}

fn parse_guid(endpoint: &str) -> Result<GUID, RawError> {
    let bare = endpoint.trim_start_matches('{').trim_end_matches('}');
    GUID::try_from(bare).map_err(|_| RawError::Failed {
        message: format!("id {endpoint:?} is not a GUID"),
    })
}

/// An open network handle, closed on drop.
struct Network {
    handle: *mut c_void,
    close: library::CloseFn,
}

impl Network {
    fn open(hcn: &Hcn, network: Option<&str>) -> Result<Network, RawError> {
        let network = network.ok_or_else(|| RawError::Failed {
            message: "no endpoint listed names its HNS network".into(),
        })?;
        let guid = parse_guid(network)?;
        let mut handle: *mut c_void = std::ptr::null_mut();
        let mut record = PWSTR::null();
        // SAFETY: valid GUID and out pointers; the error record is freed by take_string.
        let result = unsafe { (hcn.open_network)(&guid, &mut handle, &mut record) };
        let record = unsafe { take_string(record) };
        check("HcnOpenNetwork", result, record)?;
        Ok(Network {
            handle,
            close: hcn.close_network,
        })
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // SAFETY: the handle came from HcnOpenNetwork and is closed once.
        if let Err(e) = unsafe { (self.close)(self.handle) }.ok() {
            tracing::warn!(error = %e, "HcnCloseNetwork failed");
        }
    }
}

/// An open endpoint handle, closed on drop.
struct Endpoint {
    handle: *mut c_void,
    close: library::CloseFn,
}

impl Endpoint {
    fn open(hcn: &Hcn, endpoint: &str) -> Result<Endpoint, RawError> {
        let guid = parse_guid(endpoint)?;
        let mut handle: *mut c_void = std::ptr::null_mut();
        let mut record = PWSTR::null();
        // SAFETY: valid GUID and out pointers; the error record is freed by take_string.
        let result = unsafe { (hcn.open_endpoint)(&guid, &mut handle, &mut record) };
        let record = unsafe { take_string(record) };
        check("HcnOpenEndpoint", result, record)?;
        Ok(Endpoint {
            handle,
            close: hcn.close_endpoint,
        })
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: the handle came from HcnOpenEndpoint and is closed once.
        if let Err(e) = unsafe { (self.close)(self.handle) }.ok() {
            tracing::warn!(error = %e, "HcnCloseEndpoint failed");
        }
    }
}

/// The HNS version from the V1 globals query.
fn hns_version(hcn: &Hcn) -> Result<HnsVersion, String> {
    let method = HSTRING::from("GET");
    let path = HSTRING::from("/globals/version");
    let request = HSTRING::new();
    let mut response = PWSTR::null();
    // SAFETY: valid NUL-terminated inputs; the response is freed by take_string.
    let result = unsafe {
        (hcn.hns_call)(
            PCWSTR(method.as_ptr()),
            PCWSTR(path.as_ptr()),
            PCWSTR(request.as_ptr()),
            &mut response,
        )
    };
    let response = unsafe { take_string(response) };
    result
        .ok()
        .map_err(|e| format!("HNSCall GET /globals/version: {e}"))?;
    let text = response.ok_or("HNSCall GET /globals/version returned nothing")?;
    let envelope: HnsResponse = serde_json::from_str(&text)
        .map_err(|e| format!("unreadable HNS response {text:?}: {e}"))?;
    if !envelope.success {
        return Err(format!("HNS refused the version query: {}", envelope.error));
    }
    serde_json::from_value(envelope.output).map_err(|e| format!("unreadable HNS version: {e}"))
}

impl HcnCalls for HcnClient {
    fn enumerate_endpoints(&self, query: &str) -> Result<String, RawError> {
        let query = HSTRING::from(query);
        let mut endpoints = PWSTR::null();
        let mut record = PWSTR::null();
        // SAFETY: valid query string and out pointers; both outputs are freed by take_string.
        let result = unsafe {
            (self.hcn.enumerate_endpoints)(PCWSTR(query.as_ptr()), &mut endpoints, &mut record)
        };
        let endpoints = unsafe { take_string(endpoints) };
        let record = unsafe { take_string(record) };
        check("HcnEnumerateEndpoints", result, record)?;
        Ok(endpoints.unwrap_or_else(|| "[]".to_string()))
    }

    fn query_endpoint(&self, endpoint: &str, query: &str) -> Result<String, RawError> {
        let handle = Endpoint::open(self.hcn, endpoint)?;
        let query = HSTRING::from(query);
        let mut properties = PWSTR::null();
        let mut record = PWSTR::null();
        // SAFETY: open handle, valid query and out pointers; outputs freed by take_string.
        let result = unsafe {
            (self.hcn.query_endpoint_properties)(
                handle.handle,
                PCWSTR(query.as_ptr()),
                &mut properties,
                &mut record,
            )
        };
        let properties = unsafe { take_string(properties) };
        let record = unsafe { take_string(record) };
        check("HcnQueryEndpointProperties", result, record)?;
        properties.ok_or_else(|| RawError::Failed {
            message: "HcnQueryEndpointProperties returned no properties".into(),
        })
    }

    fn modify_endpoint(&self, endpoint: &str, request: &str) -> Result<(), RawError> {
        let handle = Endpoint::open(self.hcn, endpoint)?;
        let request = HSTRING::from(request);
        let mut record = PWSTR::null();
        // SAFETY: open handle, valid request and out pointer; the record is freed by take_string.
        let result = unsafe {
            (self.hcn.modify_endpoint)(handle.handle, PCWSTR(request.as_ptr()), &mut record)
        };
        let record = unsafe { take_string(record) };
        check("HcnModifyEndpoint", result, record)
    }

    fn query_network(&self, network: Option<&str>, query: &str) -> Result<String, RawError> {
        let handle = Network::open(self.hcn, network)?;
        let query = HSTRING::from(query);
        let mut properties = PWSTR::null();
        let mut record = PWSTR::null();
        // SAFETY: open handle, valid query and out pointers; outputs freed by take_string.
        let result = unsafe {
            (self.hcn.query_network_properties)(
                handle.handle,
                PCWSTR(query.as_ptr()),
                &mut properties,
                &mut record,
            )
        };
        let properties = unsafe { take_string(properties) };
        let record = unsafe { take_string(record) };
        check("HcnQueryNetworkProperties", result, record)?;
        properties.ok_or_else(|| RawError::Failed {
            message: "HcnQueryNetworkProperties returned no properties".into(),
        })
    }

    fn modify_network(&self, network: Option<&str>, request: &str) -> Result<(), RawError> {
        let handle = Network::open(self.hcn, network)?;
        let request = HSTRING::from(request);
        let mut record = PWSTR::null();
        // SAFETY: open handle, valid request and out pointer; the record is freed by take_string.
        let result = unsafe {
            (self.hcn.modify_network)(handle.handle, PCWSTR(request.as_ptr()), &mut record)
        };
        let record = unsafe { take_string(record) };
        check("HcnModifyNetwork", result, record)
    }

    fn needs_network_id(&self) -> bool {
        true
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn resync_signal(&self) -> &ResyncSignal {
        &self.resync
    }
}
