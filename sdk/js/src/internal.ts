// Not public: what the unit tests reach inside (the ordering buffer, the
// generated schema for a scripted server). Bundled as dist/internal.js.
export * from "./order.js";
export * as pb from "./gen/inboxd_pb.js";
export { create, fromBinary, toBinary } from "@bufbuild/protobuf";
