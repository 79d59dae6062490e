//! The HCN client: the raw `computenetwork.dll` calls behind [`HcnCalls`]. Only the FFI lives
//! here; building requests, parsing responses and classifying errors are shared with the
//! simulator in [`crate::client`], and everything above that in [`crate::programmer`].
//!
//! - Every call blocks and may take seconds under load. The agent makes them from its reconcile
//!   thread (through [`HcnDatapath`](crate::client::HcnDatapath)), never on its async runtime.
//! - Every output string and every error record HCN allocates is freed with `CoTaskMemFree`,
//!   on success and on failure alike; endpoint handles are closed by a guard.
//! - The HNS version comes from the V1 globals query (`HNSCall GET /globals/version` in
//!   `vmcompute.dll`, which the `windows` crate does not bind; there is no `HcnQueryGlobals`).
//!   [`Capabilities::of`] refuses an HNS without the V2 API or ACL lists and ranges, and logs
//!   that IPv6 rules are left out where dual stack is missing.
//! - `HcnRegisterServiceCallback` reports a service disconnect (an HNS restart, which drops
//!   endpoint policies); the client then raises its [`ResyncSignal`] so the programmer re-reads
//!   every endpoint. A restarted HNS forgets the registration: after a resync the agent should
//!   build a new client with [`HcnClient::connect`].

use std::ffi::c_void;
use std::sync::Arc;

use windows::core::{GUID, HRESULT, HSTRING, PCWSTR, PWSTR};
use windows::Win32::System::Com::CoTaskMemFree;
use windows::Win32::System::HostComputeNetwork::{
    HcnCloseEndpoint, HcnEnumerateEndpoints, HcnModifyEndpoint, HcnNotificationServiceDisconnect,
    HcnOpenEndpoint, HcnQueryEndpointProperties, HcnRegisterServiceCallback,
    HcnUnregisterServiceCallback,
};

use crate::client::{HcnCalls, RawError};
use crate::resync::ResyncSignal;
use crate::schema::HnsResponse;
use crate::version::{Capabilities, HnsVersion, Unsupported};

/// `HCN_E_ENDPOINT_NOT_FOUND` (computenetwork.h; the `windows` crate does not define it).
const HCN_E_ENDPOINT_NOT_FOUND: HRESULT = HRESULT(0x803B_0002_u32 as i32);
/// `HRESULT_FROM_WIN32(ERROR_NOT_FOUND)`.
const E_NOT_FOUND: HRESULT = HRESULT(0x8007_0490_u32 as i32);

#[link(name = "vmcompute", kind = "raw-dylib")]
extern "system" {
    /// The V1 HNS entry point: a REST-like call with JSON in and out. The response is
    /// allocated with CoTaskMemAlloc.
    fn HNSCall(method: PCWSTR, path: PCWSTR, object: PCWSTR, response: *mut PWSTR) -> HRESULT;
}

/// Why the client could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("reading the HNS version failed: {0}")]
    Version(String),
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
}

/// The registration of the service callback, unregistered on drop.
struct CallbackHandle(*mut c_void);

// SAFETY: the handle is an opaque token HCN hands out; it is only passed back to
// HcnUnregisterServiceCallback, once, from Drop. HCN does not tie it to a thread.
unsafe impl Send for CallbackHandle {}
// SAFETY: as above; no method reads it through a shared reference.
unsafe impl Sync for CallbackHandle {}

/// The HCN client.
pub struct HcnClient {
    capabilities: Capabilities,
    // Declared before `resync` so it unregisters before the signal it points to is dropped.
    callback: Option<CallbackHandle>,
    resync: Arc<ResyncSignal>,
}

impl std::fmt::Debug for HcnClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HcnClient")
            .field("capabilities", &self.capabilities)
            .field("disconnect_detection", &self.callback.is_some())
            .finish()
    }
}

impl HcnClient {
    /// Reads the HNS version, refuses an HNS netpol cannot program, and registers for
    /// service-disconnect notifications. Blocks.
    pub fn connect() -> Result<HcnClient, ConnectError> {
        let version = hns_version().map_err(ConnectError::Version)?;
        let capabilities = Capabilities::of(version).inspect_err(|e| {
            tracing::error!(hns_version = %version, "{e}; netpol cannot program this host");
        })?;
        tracing::info!(hns_version = %version, dual_stack = capabilities.dual_stack, "connected to HNS");
        let resync = Arc::new(ResyncSignal::default());
        let callback = register_disconnect_callback(&resync);
        Ok(HcnClient {
            capabilities,
            callback,
            resync,
        })
    }
}

impl Drop for HcnClient {
    fn drop(&mut self) {
        if let Some(handle) = self.callback.take() {
            // SAFETY: the handle came from HcnRegisterServiceCallback and is unregistered once.
            if let Err(e) = unsafe { HcnUnregisterServiceCallback(handle.0) } {
                tracing::warn!(error = %e, "unregistering the HNS service callback failed");
            }
        }
    }
}

/// Called by HCN on its own thread. Must not unwind into HCN.
unsafe extern "system" fn on_service_notification(
    notification_type: u32,
    context: *const c_void,
    _status: HRESULT,
    _data: PCWSTR,
) {
    if notification_type != HcnNotificationServiceDisconnect.0 as u32 || context.is_null() {
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

fn register_disconnect_callback(signal: &Arc<ResyncSignal>) -> Option<CallbackHandle> {
    let mut handle: *mut c_void = std::ptr::null_mut();
    let context = Arc::as_ptr(signal) as *const c_void;
    // SAFETY: the callback only dereferences `context` while the client (which owns an Arc of
    // the signal) is alive; Drop unregisters it first.
    match unsafe { HcnRegisterServiceCallback(Some(on_service_notification), context, &mut handle) }
    {
        Ok(()) => Some(CallbackHandle(handle)),
        Err(e) => {
            tracing::warn!(error = %e, "cannot register for HNS disconnect notifications; resync relies on periodic reads");
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

fn raw_error(call: &str, error: windows::core::Error, record: Option<String>) -> RawError {
    let code = error.code();
    if code == HCN_E_ENDPOINT_NOT_FOUND || code == E_NOT_FOUND {
        return RawError::NotFound;
    }
    let record = record.filter(|r| !r.is_empty());
    RawError::Failed {
        message: match record {
            Some(r) => format!("{call}: {code} {}: {r}", error.message()),
            None => format!("{call}: {code} {}", error.message()),
        },
    }
}

fn parse_guid(endpoint: &str) -> Result<GUID, RawError> {
    let bare = endpoint.trim_start_matches('{').trim_end_matches('}');
    GUID::try_from(bare).map_err(|_| RawError::Failed {
        message: format!("endpoint id {endpoint:?} is not a GUID"),
    })
}

/// An open endpoint handle, closed on drop.
struct Endpoint(*mut c_void);

impl Endpoint {
    fn open(endpoint: &str) -> Result<Endpoint, RawError> {
        let guid = parse_guid(endpoint)?;
        let mut handle: *mut c_void = std::ptr::null_mut();
        let mut record = PWSTR::null();
        // SAFETY: valid GUID and out pointers; the error record is freed by take_string.
        let result = unsafe { HcnOpenEndpoint(&guid, &mut handle, Some(&mut record)) };
        let record = unsafe { take_string(record) };
        result.map_err(|e| raw_error("HcnOpenEndpoint", e, record))?;
        Ok(Endpoint(handle))
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: the handle came from HcnOpenEndpoint and is closed once.
        if let Err(e) = unsafe { HcnCloseEndpoint(self.0) } {
            tracing::warn!(error = %e, "HcnCloseEndpoint failed");
        }
    }
}

/// The HNS version from the V1 globals query.
fn hns_version() -> Result<HnsVersion, String> {
    let method = HSTRING::from("GET");
    let path = HSTRING::from("/globals/version");
    let object = HSTRING::new();
    let mut response = PWSTR::null();
    // SAFETY: valid NUL-terminated inputs; the response is freed by take_string.
    let hr = unsafe {
        HNSCall(
            PCWSTR(method.as_ptr()),
            PCWSTR(path.as_ptr()),
            PCWSTR(object.as_ptr()),
            &mut response,
        )
    };
    let response = unsafe { take_string(response) };
    hr.ok()
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
        let result = unsafe { HcnEnumerateEndpoints(&query, &mut endpoints, Some(&mut record)) };
        let endpoints = unsafe { take_string(endpoints) };
        let record = unsafe { take_string(record) };
        result.map_err(|e| raw_error("HcnEnumerateEndpoints", e, record))?;
        Ok(endpoints.unwrap_or_else(|| "[]".to_string()))
    }

    fn query_endpoint(&self, endpoint: &str, query: &str) -> Result<String, RawError> {
        let handle = Endpoint::open(endpoint)?;
        let query = HSTRING::from(query);
        let mut properties = PWSTR::null();
        let mut record = PWSTR::null();
        // SAFETY: open handle, valid query and out pointers; outputs freed by take_string.
        let result = unsafe {
            HcnQueryEndpointProperties(handle.0, &query, &mut properties, Some(&mut record))
        };
        let properties = unsafe { take_string(properties) };
        let record = unsafe { take_string(record) };
        result.map_err(|e| raw_error("HcnQueryEndpointProperties", e, record))?;
        properties.ok_or_else(|| RawError::Failed {
            message: "HcnQueryEndpointProperties returned no properties".into(),
        })
    }

    fn modify_endpoint(&self, endpoint: &str, request: &str) -> Result<(), RawError> {
        let handle = Endpoint::open(endpoint)?;
        let request = HSTRING::from(request);
        let mut record = PWSTR::null();
        // SAFETY: open handle, valid request and out pointer; the record is freed by take_string.
        let result = unsafe { HcnModifyEndpoint(handle.0, &request, Some(&mut record)) };
        let record = unsafe { take_string(record) };
        result.map_err(|e| raw_error("HcnModifyEndpoint", e, record))
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn resync_signal(&self) -> &ResyncSignal {
        &self.resync
    }
}
