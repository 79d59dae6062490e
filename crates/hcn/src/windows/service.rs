//! The probe of the HNS restart watch ([`crate::restart`]): the `hns` service's state and
//! process id, from the service control manager (`advapi32.dll`, present on every Windows).

use windows::core::{w, Owned};
use windows::Win32::System::Services::{
    OpenSCManagerW, OpenServiceW, QueryServiceStatusEx, SC_MANAGER_CONNECT, SC_STATUS_PROCESS_INFO,
    SERVICE_QUERY_STATUS, SERVICE_RUNNING, SERVICE_STATUS_PROCESS,
};

use crate::restart::ServiceState;

/// The `hns` service's state, or None if the service control manager cannot tell (the restart
/// detector then keeps what it saw last).
pub fn hns_service_state() -> Option<ServiceState> {
    match query() {
        Ok(state) => Some(state),
        Err(error) => {
            tracing::debug!(%error, "querying the hns service failed");
            None
        }
    }
}

fn query() -> windows::core::Result<ServiceState> {
    // SAFETY: null machine and database names select the local active database; the handles are
    // closed by Owned.
    let manager = unsafe { Owned::new(OpenSCManagerW(None, None, SC_MANAGER_CONNECT)?) };
    let service = unsafe { Owned::new(OpenServiceW(*manager, w!("hns"), SERVICE_QUERY_STATUS)?) };
    let mut status = SERVICE_STATUS_PROCESS::default();
    let mut needed = 0u32;
    // SAFETY: the buffer is a SERVICE_STATUS_PROCESS, as SC_STATUS_PROCESS_INFO requires, and
    // lives across the call.
    let buffer = unsafe {
        std::slice::from_raw_parts_mut(
            (&mut status as *mut SERVICE_STATUS_PROCESS).cast::<u8>(),
            std::mem::size_of::<SERVICE_STATUS_PROCESS>(),
        )
    };
    unsafe { QueryServiceStatusEx(*service, SC_STATUS_PROCESS_INFO, Some(buffer), &mut needed)? };
    Ok(
        if status.dwCurrentState == SERVICE_RUNNING && status.dwProcessId != 0 {
            ServiceState::Running {
                process_id: status.dwProcessId,
            }
        } else {
            ServiceState::NotRunning
        },
    )
}
