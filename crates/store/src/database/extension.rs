//! Registers sqlite-vec (the `vec0` vector table) with every connection SQLite opens.

use std::ffi::{c_char, c_int};
use std::sync::OnceLock;

use rusqlite::ffi;

/// The entry point SQLite calls on each new connection.
type ExtensionEntryPoint =
    unsafe extern "C" fn(*mut ffi::sqlite3, *mut *mut c_char, *const ffi::sqlite3_api_routines) -> c_int;

/// Makes sqlite-vec's functions and `vec0` available on every connection opened after
/// this returns. SQLite keeps the list of automatic extensions per process, so the
/// registration happens once and its result is remembered.
#[allow(unsafe_code)]
pub(super) fn register_vector_extension() -> Result<(), String> {
    static REGISTERED: OnceLock<c_int> = OnceLock::new();
    let code = *REGISTERED.get_or_init(|| {
        // SAFETY: `sqlite3_vec_init` is the C function
        // `int sqlite3_vec_init(sqlite3 *, char **, const sqlite3_api_routines *)`,
        // compiled with SQLITE_CORE into this binary; the sqlite-vec crate declares it
        // without parameters, so the pointer is re-typed to its real signature (function
        // pointers share one size and C ABI). `sqlite3_auto_extension` only stores the
        // pointer and is thread-safe; SQLite calls it with valid arguments.
        unsafe {
            let entry_point =
                std::mem::transmute::<unsafe extern "C" fn(), ExtensionEntryPoint>(sqlite_vec::sqlite3_vec_init);
            ffi::sqlite3_auto_extension(Some(entry_point))
        }
    });
    if code == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(format!("SQLite refused the sqlite-vec extension (error code {code})"))
    }
}
