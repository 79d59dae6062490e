//! `computenetwork.dll` and `vmcompute.dll`, loaded at run time. Linking them at load time would
//! put them in the executable's import table, and Windows refuses to start a program whose
//! imports are missing, before `main`: `netpol --help` would fail on every host without the Host
//! Network Service. So they are loaded here, on first use by the HCN datapath only, from System32
//! alone (never from the working directory or `PATH`), and each function is resolved by name.
//! Nothing in this crate calls the `windows` crate's HCN bindings, which would link them.
//!
//! The libraries stay loaded for the life of the process: a service callback registered through
//! them may fire at any time.

use std::ffi::c_void;
use std::sync::OnceLock;

use windows::core::{s, w, GUID, HRESULT, PCSTR, PCWSTR, PWSTR};
use windows::Win32::Foundation::{FARPROC, HMODULE};
use windows::Win32::System::LibraryLoader::{
    GetProcAddress, LoadLibraryExW, LOAD_LIBRARY_SEARCH_SYSTEM32,
};

/// `HcnEnumerateEndpoints(query, endpoints, error_record)`.
pub type EnumerateFn =
    unsafe extern "system" fn(query: PCWSTR, out: *mut PWSTR, record: *mut PWSTR) -> HRESULT;
/// `HcnOpenEndpoint(id, handle, error_record)`; the id is passed by pointer (`REFGUID`).
/// `HcnOpenNetwork` has the same signature.
pub type OpenFn = unsafe extern "system" fn(
    id: *const GUID,
    handle: *mut *mut c_void,
    record: *mut PWSTR,
) -> HRESULT;
/// `HcnQueryEndpointProperties(handle, query, properties, error_record)`;
/// `HcnQueryNetworkProperties` has the same signature.
pub type QueryFn = unsafe extern "system" fn(
    handle: *const c_void,
    query: PCWSTR,
    properties: *mut PWSTR,
    record: *mut PWSTR,
) -> HRESULT;
/// `HcnModifyEndpoint(handle, settings, error_record)`; `HcnModifyNetwork` has the same
/// signature.
pub type ModifyFn = unsafe extern "system" fn(
    handle: *const c_void,
    settings: PCWSTR,
    record: *mut PWSTR,
) -> HRESULT;
/// `HcnCloseEndpoint(handle)`; `HcnCloseNetwork` has the same signature.
pub type CloseFn = unsafe extern "system" fn(handle: *const c_void) -> HRESULT;
/// `HCN_NOTIFICATION_CALLBACK`.
pub type NotificationCallback =
    unsafe extern "system" fn(kind: u32, context: *const c_void, status: HRESULT, data: PCWSTR);
/// `HcnRegisterServiceCallback(callback, context, handle)`.
pub type RegisterFn = unsafe extern "system" fn(
    callback: Option<NotificationCallback>,
    context: *const c_void,
    handle: *mut *mut c_void,
) -> HRESULT;
/// `HcnUnregisterServiceCallback(handle)`.
pub type UnregisterFn = unsafe extern "system" fn(handle: *const c_void) -> HRESULT;
/// `HNSCall(method, path, request, response)` in `vmcompute.dll`: the V1 HNS entry point, JSON
/// in and out; the response is allocated with `CoTaskMemAlloc`.
pub type HnsCallFn = unsafe extern "system" fn(
    method: PCWSTR,
    path: PCWSTR,
    request: PCWSTR,
    response: *mut PWSTR,
) -> HRESULT;

/// `HcnNotificationServiceDisconnect` (computenetwork.h).
pub const NOTIFICATION_SERVICE_DISCONNECT: u32 = 0x0100_0000;

/// The HCN functions netpol calls.
#[derive(Clone, Copy, Debug)]
pub struct Hcn {
    pub enumerate_endpoints: EnumerateFn,
    pub open_endpoint: OpenFn,
    pub query_endpoint_properties: QueryFn,
    pub modify_endpoint: ModifyFn,
    pub close_endpoint: CloseFn,
    /// `HcnOpenNetwork`, `HcnQueryNetworkProperties`, `HcnModifyNetwork`, `HcnCloseNetwork`:
    /// the network calls of IP sets. Same C signatures as their endpoint counterparts.
    pub open_network: OpenFn,
    pub query_network_properties: QueryFn,
    pub modify_network: ModifyFn,
    pub close_network: CloseFn,
    pub register_service_callback: RegisterFn,
    pub unregister_service_callback: UnregisterFn,
    /// From `vmcompute.dll`: the HNS version query.
    pub hns_call: HnsCallFn,
}

/// Why the HCN libraries could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error(
        "{library} cannot be loaded from System32 ({code:#010x}: {message}): this Windows host \
         has no Host Network Service. `--datapath hcn` needs a Windows node with the Containers \
         feature (Windows Server 2019 or Windows 10 1809 and later); every other netpol command \
         runs without it"
    )]
    Library {
        library: &'static str,
        code: u32,
        message: String,
    },
    #[error(
        "{library} has no {function} ({code:#010x}): the Host Network Service on this host is \
         older than the HCN V2 API netpol needs (Windows Server 2019 or later)"
    )]
    Function {
        library: &'static str,
        function: &'static str,
        code: u32,
    },
}

/// A loaded library, kept for the life of the process.
struct Module(HMODULE, &'static str);

fn load(name: PCWSTR, library: &'static str) -> Result<Module, LoadError> {
    // SAFETY: a NUL-terminated literal; SEARCH_SYSTEM32 keeps the search to System32.
    unsafe { LoadLibraryExW(name, None, LOAD_LIBRARY_SEARCH_SYSTEM32) }
        .map(|module| Module(module, library))
        .map_err(|e| LoadError::Library {
            library,
            code: e.code().0 as u32,
            message: e.message(),
        })
}

impl Module {
    fn function(&self, name: PCSTR, function: &'static str) -> Result<FARPROC, LoadError> {
        // SAFETY: a loaded module and a NUL-terminated literal.
        let address = unsafe { GetProcAddress(self.0, name) };
        if address.is_none() {
            return Err(LoadError::Function {
                library: self.1,
                function,
                code: windows::core::Error::from_thread().code().0 as u32,
            });
        }
        Ok(address)
    }
}

/// Resolves `$name` in `$module` as the function type `$ty`.
macro_rules! resolve {
    ($module:expr, $name:literal, $ty:ty) => {{
        let address = $module.function(s!($name), $name)?;
        // SAFETY: the export named `$name` has the C signature `$ty` spells out
        // (computenetwork.h; HNSCall as hcsshim declares it). `function` returned Some.
        unsafe { std::mem::transmute::<FARPROC, Option<$ty>>(address) }
            .expect("function() returned a non-null address")
    }};
}

fn load_all() -> Result<Hcn, LoadError> {
    let hcn = load(w!("computenetwork.dll"), "computenetwork.dll")?;
    let vmcompute = load(w!("vmcompute.dll"), "vmcompute.dll")?;
    Ok(Hcn {
        enumerate_endpoints: resolve!(hcn, "HcnEnumerateEndpoints", EnumerateFn),
        open_endpoint: resolve!(hcn, "HcnOpenEndpoint", OpenFn),
        query_endpoint_properties: resolve!(hcn, "HcnQueryEndpointProperties", QueryFn),
        modify_endpoint: resolve!(hcn, "HcnModifyEndpoint", ModifyFn),
        close_endpoint: resolve!(hcn, "HcnCloseEndpoint", CloseFn),
        open_network: resolve!(hcn, "HcnOpenNetwork", OpenFn),
        query_network_properties: resolve!(hcn, "HcnQueryNetworkProperties", QueryFn),
        modify_network: resolve!(hcn, "HcnModifyNetwork", ModifyFn),
        close_network: resolve!(hcn, "HcnCloseNetwork", CloseFn),
        register_service_callback: resolve!(hcn, "HcnRegisterServiceCallback", RegisterFn),
        unregister_service_callback: resolve!(hcn, "HcnUnregisterServiceCallback", UnregisterFn),
        hns_call: resolve!(vmcompute, "HNSCall", HnsCallFn),
    })
    // The modules are never freed: the functions above point into them.
}

/// The HCN functions, loaded on first use. The outcome is kept: a host without HNS does not
/// grow one while netpol runs.
pub fn hcn() -> Result<&'static Hcn, LoadError> {
    static LOADED: OnceLock<Result<Hcn, LoadError>> = OnceLock::new();
    LOADED.get_or_init(load_all).as_ref().map_err(Clone::clone)
}
