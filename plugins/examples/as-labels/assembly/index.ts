// Example node_labels plugin for hcloud-policy-ccm (ABI v1) in AssemblyScript.
//
// Labels, from the facts in the request (the same answers as the Go example labels-and-name
// and the Rust example rust-labels, checked by the shared cases in ../cases/node_labels):
//   - example.com/size: "small" for a cloud server of at most 4 cores, "large" above,
//     "dedicated" for a Robot server; none without either;
//   - example.com/arch: the server type's architecture ("x86", "arm");
//   - example.com/location: the server's location.
//
// JSON: assemblyscript-json 1.1.0 (decoder to a JSON.Obj tree, JSONEncoder for the reply),
// which keeps every export with asc 0.28.20. A request that does not parse aborts the call
// (env.abort), which the host reports as the call's error.
import { JSON, JSONEncoder } from "assemblyscript-json/assembly";

const SMALL_CORES: i64 = 4;

export function ccm_abi_version(): i32 {
  return 1;
}

// ccm_alloc returns a pinned buffer of len bytes: the garbage collector keeps it until ccm_free.
export function ccm_alloc(len: i32): usize {
  return __pin(changetype<usize>(new ArrayBuffer(len)));
}

export function ccm_free(ptr: usize, len: i32): void {
  __unpin(ptr);
}

export function ccm_node_labels(ptr: usize, len: i32): u64 {
  const request = Uint8Array.wrap(changetype<ArrayBuffer>(ptr), 0, len);
  const reply = labelsReply(request);
  const buf = new ArrayBuffer(reply.length);
  memory.copy(changetype<usize>(buf), reply.dataStart, reply.length);
  return (<u64>__pin(changetype<usize>(buf)) << 32) | <u64>reply.length;
}

// labelsReply computes {"labels": {...}} for one request.
function labelsReply(request: Uint8Array): Uint8Array {
  const root = <JSON.Obj>JSON.parse(request);
  const enc = new JSONEncoder();
  enc.pushObject(null);
  enc.pushObject("labels");
  const server = root.getObj("server");
  if (server != null) {
    writeLabels(enc, server);
  }
  enc.popObject();
  enc.popObject();
  return enc.serialize();
}

function writeLabels(enc: JSONEncoder, server: JSON.Obj): void {
  const serverType = server.getObj("server_type");
  if (server.getObj("robot") != null) {
    enc.setString("example.com/size", "dedicated");
  } else if (serverType != null) {
    const cores = serverType.getInteger("cores");
    const large = cores != null && cores.valueOf() > SMALL_CORES;
    enc.setString("example.com/size", large ? "large" : "small");
    const arch = serverType.getString("architecture");
    if (arch != null) {
      enc.setString("example.com/arch", arch.valueOf());
    }
  }
  const location = server.getString("location");
  if (location != null && location.valueOf().length > 0) {
    enc.setString("example.com/location", location.valueOf());
  }
}
