//! Example node_labels plugin for hcloud-policy-ccm (ABI v1) in Rust, with serde.
//!
//! Labels, from the facts in the request (the same answers as the Go example labels-and-name,
//! checked by the shared cases in plugins/examples/cases/node_labels):
//!   - `example.com/size`: `small` for a cloud server of at most 4 cores, `large` above,
//!     `dedicated` for a Robot server; none without either;
//!   - `example.com/arch`: the server type's architecture (`x86`, `arm`);
//!   - `example.com/location`: the server's location.
//!
//! Build (offline, Debian's rustc, libstd-rust-dev-wasm32, lld, librust-serde-json-dev):
//!
//!     cargo build --release --target wasm32-unknown-unknown
//!
//! The module imports nothing; memory is Rust's own allocator behind ccm_alloc/ccm_free.

use serde::{Deserialize, Serialize};
use std::alloc::{alloc, dealloc, Layout};
use std::collections::BTreeMap;

/// The part of the node_labels request this plugin reads; other fields are ignored (the
/// request gains fields within ABI v1).
#[derive(Deserialize)]
struct Request {
    server: Server,
}

#[derive(Deserialize)]
struct Server {
    #[serde(default)]
    location: Option<String>,
    #[serde(default)]
    server_type: Option<ServerType>,
    #[serde(default)]
    robot: Option<Robot>,
}

#[derive(Deserialize)]
struct ServerType {
    cores: i64,
    architecture: String,
}

#[derive(Deserialize)]
struct Robot {
    #[allow(dead_code)]
    product: String,
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum Reply {
    Labels(BTreeMap<&'static str, String>),
    Error(String),
}

/// The most cores of a "small" server.
const SMALL_CORES: i64 = 4;

/// Computes the labels for one request (JSON bytes).
pub fn labels(request: &[u8]) -> Result<BTreeMap<&'static str, String>, String> {
    let req: Request = serde_json::from_slice(request).map_err(|e| format!("decode request: {e}"))?;
    let mut out = BTreeMap::new();
    if req.server.robot.is_some() {
        out.insert("example.com/size", "dedicated".to_string());
    } else if let Some(t) = req.server.server_type {
        let size = if t.cores > SMALL_CORES { "large" } else { "small" };
        out.insert("example.com/size", size.to_string());
        out.insert("example.com/arch", t.architecture);
    }
    if let Some(loc) = req.server.location.filter(|l| !l.is_empty()) {
        out.insert("example.com/location", loc);
    }
    Ok(out)
}

/// Encodes the reply for a request: {"labels": {...}} or {"error": "..."}.
pub fn reply(request: &[u8]) -> Vec<u8> {
    let r = match labels(request) {
        Ok(l) => Reply::Labels(l),
        Err(e) => Reply::Error(e),
    };
    serde_json::to_vec(&r).unwrap_or_else(|_| br#"{"error":"encode reply"}"#.to_vec())
}

fn layout(len: i32) -> Layout {
    Layout::array::<u8>((len as usize).max(1)).expect("wasm32 lengths fit a layout")
}

#[no_mangle]
pub extern "C" fn ccm_abi_version() -> i32 {
    1
}

/// Returns len bytes (at least one) that stay valid until ccm_free(ptr, len).
#[no_mangle]
pub extern "C" fn ccm_alloc(len: i32) -> *mut u8 {
    unsafe { alloc(layout(len)) }
}

/// Frees a buffer of ccm_alloc, or the reply of a hook, with the length it was made with.
///
/// # Safety
/// ptr must come from ccm_alloc(len) (or be a reply of len bytes) and not be freed yet.
#[no_mangle]
pub unsafe extern "C" fn ccm_free(ptr: *mut u8, len: i32) {
    dealloc(ptr, layout(len))
}

/// The node_labels hook: the request at ptr, the reply packed as ptr << 32 | len.
///
/// # Safety
/// ptr and len must describe the request the host wrote into a ccm_alloc buffer.
#[no_mangle]
pub unsafe extern "C" fn ccm_node_labels(ptr: *const u8, len: i32) -> i64 {
    let out = reply(std::slice::from_raw_parts(ptr, len as usize));
    let n = out.len() as i32;
    let p = ccm_alloc(n);
    std::ptr::copy_nonoverlapping(out.as_ptr(), p, out.len());
    (((p as u32 as u64) << 32) | n as u32 as u64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_servers_get_size_arch_and_location() {
        let req = br#"{"server":{"location":"fsn1","server_type":{"name":"cax21","cores":4,"memory_gb":8,"disk_gb":80,"architecture":"arm","cpu_type":"shared"}}}"#;
        assert_eq!(
            String::from_utf8(reply(req)).unwrap(),
            r#"{"labels":{"example.com/arch":"arm","example.com/location":"fsn1","example.com/size":"small"}}"#
        );
    }

    #[test]
    fn robot_servers_are_dedicated_and_large_types_large() {
        let robot = br#"{"server":{"location":"fsn1","robot":{"product":"AX41-NVMe","data_center":"FSN1-DC16"}}}"#;
        assert_eq!(labels(robot).unwrap().get("example.com/size").unwrap(), "dedicated");
        let large = br#"{"server":{"server_type":{"cores":8,"architecture":"x86"}}}"#;
        assert_eq!(labels(large).unwrap().get("example.com/size").unwrap(), "large");
    }

    #[test]
    fn a_request_that_does_not_decode_is_an_error_reply() {
        let got = String::from_utf8(reply(b"{")).unwrap();
        assert!(got.starts_with(r#"{"error":"decode request: "#), "{got}");
    }
}
