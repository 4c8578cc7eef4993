// Regenerates vectors.json: frames encoded by npm loro-protocol 0.3.0, which
// tests/memory/blocks/sync/test_protocol.py decodes (and re-encodes byte for byte).
//   node tests/memory/blocks/sync/vectors/make_vectors.mjs
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  CrdtType,
  JoinErrorCode,
  MessageType,
  RoomErrorCode,
  UpdateStatusCode,
  bytesToHex,
  encode,
} from "loro-protocol";
import { LoroDoc } from "loro-crdt";

const doc = new LoroDoc();
doc.setPeerId(7n);
doc.getText("text").insert(0, "héllo, wörld");
doc.commit();
const update = doc.export({ mode: "update" });
const version = doc.version().encode();
const big = new Uint8Array(3000).map((_, i) => i % 251);
const hex = (bytes) => bytesToHex(bytes).slice(2);
const room = "2f1c8a52-6a70-4d1e-9a0b-0c6a6f1f4a11";

const messages = [
  { name: "join_request", type: MessageType.JoinRequest, crdt: CrdtType.Loro, roomId: room, auth: new TextEncoder().encode("token-abc"), version },
  { name: "join_request_empty", type: MessageType.JoinRequest, crdt: CrdtType.LoroEphemeralStore, roomId: room, auth: new Uint8Array(), version: new Uint8Array() },
  { name: "join_response_ok_write", type: MessageType.JoinResponseOk, crdt: CrdtType.Loro, roomId: room, permission: "write", version },
  { name: "join_response_ok_read_extra", type: MessageType.JoinResponseOk, crdt: CrdtType.Loro, roomId: "r", permission: "read", version: new Uint8Array([0]), extra: new Uint8Array([1, 2, 3]) },
  { name: "join_error_auth", type: MessageType.JoinError, crdt: CrdtType.Loro, roomId: room, code: JoinErrorCode.AuthFailed, message: "auth_failed" },
  { name: "join_error_version", type: MessageType.JoinError, crdt: CrdtType.Loro, roomId: room, code: JoinErrorCode.VersionUnknown, message: "unknown", receiverVersion: version },
  { name: "join_error_app", type: MessageType.JoinError, crdt: CrdtType.Loro, roomId: room, code: JoinErrorCode.AppError, message: "nope", appCode: "quota" },
  { name: "doc_update", type: MessageType.DocUpdate, crdt: CrdtType.Loro, roomId: room, updates: [update], batchId: "0x0102030405060708" },
  { name: "doc_update_many", type: MessageType.DocUpdate, crdt: CrdtType.LoroEphemeralStore, roomId: room, updates: [new Uint8Array([1]), new Uint8Array(), big], batchId: "0xffeeddccbbaa9988" },
  { name: "doc_update_empty", type: MessageType.DocUpdate, crdt: CrdtType.Loro, roomId: "", updates: [], batchId: "0x0000000000000000" },
  { name: "fragment_header", type: MessageType.DocUpdateFragmentHeader, crdt: CrdtType.Loro, roomId: room, batchId: "0xa1a2a3a4a5a6a7a8", fragmentCount: 3, totalSizeBytes: 600000 },
  { name: "fragment", type: MessageType.DocUpdateFragment, crdt: CrdtType.Loro, roomId: room, batchId: "0xa1a2a3a4a5a6a7a8", index: 2, fragment: big.subarray(0, 300) },
  { name: "room_error", type: MessageType.RoomError, crdt: CrdtType.Loro, roomId: room, code: RoomErrorCode.Evicted, message: "evicted ✓" },
  { name: "room_error_rejoin", type: MessageType.RoomError, crdt: CrdtType.Loro, roomId: room, code: RoomErrorCode.RejoinSuggested, message: "" },
  { name: "leave", type: MessageType.Leave, crdt: CrdtType.Loro, roomId: room },
  ...Object.entries(UpdateStatusCode).map(([key, status]) => ({
    name: `ack_${key}`, type: MessageType.Ack, crdt: CrdtType.Loro, roomId: room, refId: "0x1122334455667788", status,
  })),
];

const plain = (value) => {
  if (value instanceof Uint8Array) return { hex: hex(value) };
  return value;
};
const vectors = messages.map(({ name, ...message }) => ({
  name,
  frame: hex(encode(message)),
  message: Object.fromEntries(Object.entries(message).map(([k, v]) => [k, Array.isArray(v) ? v.map(plain) : plain(v)])),
}));
const out = join(dirname(fileURLToPath(import.meta.url)), "vectors.json");
writeFileSync(out, JSON.stringify({ generator: "loro-protocol@0.3.0", loroText: "héllo, wörld", vectors }, null, 1) + "\n");
console.log(`wrote ${vectors.length} vectors to ${out}`);
