// @inboxd/sdk browser bundle (generated from sdk/js by `npm run bundle`; do not edit)

// node_modules/@bufbuild/protobuf/dist/esm/is-message.js
function isMessage(arg, schema) {
  const isMessage2 = arg !== null && typeof arg == "object" && "$typeName" in arg && typeof arg.$typeName == "string";
  if (!isMessage2) {
    return false;
  }
  if (schema === void 0) {
    return true;
  }
  return schema.typeName === arg.$typeName;
}

// node_modules/@bufbuild/protobuf/dist/esm/descriptors.js
var ScalarType;
(function(ScalarType2) {
  ScalarType2[ScalarType2["DOUBLE"] = 1] = "DOUBLE";
  ScalarType2[ScalarType2["FLOAT"] = 2] = "FLOAT";
  ScalarType2[ScalarType2["INT64"] = 3] = "INT64";
  ScalarType2[ScalarType2["UINT64"] = 4] = "UINT64";
  ScalarType2[ScalarType2["INT32"] = 5] = "INT32";
  ScalarType2[ScalarType2["FIXED64"] = 6] = "FIXED64";
  ScalarType2[ScalarType2["FIXED32"] = 7] = "FIXED32";
  ScalarType2[ScalarType2["BOOL"] = 8] = "BOOL";
  ScalarType2[ScalarType2["STRING"] = 9] = "STRING";
  ScalarType2[ScalarType2["BYTES"] = 12] = "BYTES";
  ScalarType2[ScalarType2["UINT32"] = 13] = "UINT32";
  ScalarType2[ScalarType2["SFIXED32"] = 15] = "SFIXED32";
  ScalarType2[ScalarType2["SFIXED64"] = 16] = "SFIXED64";
  ScalarType2[ScalarType2["SINT32"] = 17] = "SINT32";
  ScalarType2[ScalarType2["SINT64"] = 18] = "SINT64";
})(ScalarType || (ScalarType = {}));

// node_modules/@bufbuild/protobuf/dist/esm/wire/varint.js
function varint64read() {
  const buf = this.buf;
  let pos = this.pos;
  let lo = 0;
  let hi = 0;
  for (let shift = 0; shift < 28; shift += 7) {
    const b = buf[pos++];
    lo |= (b & 127) << shift;
    if ((b & 128) == 0) {
      this.pos = pos;
      this.assertBounds();
      this.varint64Lo = lo;
      this.varint64Hi = hi;
      return;
    }
  }
  const middleByte = buf[pos++];
  lo |= (middleByte & 15) << 28;
  hi = (middleByte & 112) >> 4;
  if ((middleByte & 128) == 0) {
    this.pos = pos;
    this.assertBounds();
    this.varint64Lo = lo;
    this.varint64Hi = hi;
    return;
  }
  for (let shift = 3; shift <= 31; shift += 7) {
    const b = buf[pos++];
    hi |= (b & 127) << shift;
    if ((b & 128) == 0) {
      this.pos = pos;
      this.assertBounds();
      this.varint64Lo = lo;
      this.varint64Hi = hi;
      return;
    }
  }
  throw new Error("invalid varint");
}
var TWO_PWR_32_DBL = 4294967296;
function int64FromString(dec) {
  const minus = dec[0] === "-";
  if (minus) {
    dec = dec.slice(1);
  }
  const base = 1e6;
  let lowBits = 0;
  let highBits = 0;
  function add1e6digit(begin, end) {
    const digit1e6 = Number(dec.slice(begin, end));
    highBits *= base;
    lowBits = lowBits * base + digit1e6;
    if (lowBits >= TWO_PWR_32_DBL) {
      highBits = highBits + (lowBits / TWO_PWR_32_DBL | 0);
      lowBits = lowBits % TWO_PWR_32_DBL;
    }
  }
  add1e6digit(-24, -18);
  add1e6digit(-18, -12);
  add1e6digit(-12, -6);
  add1e6digit(-6);
  return minus ? negate(lowBits, highBits) : newBits(lowBits, highBits);
}
function int64ToString(lo, hi) {
  let bits = newBits(lo, hi);
  const negative = bits.hi & 2147483648;
  if (negative) {
    bits = negate(bits.lo, bits.hi);
  }
  const result = uInt64ToString(bits.lo, bits.hi);
  return negative ? "-" + result : result;
}
function uInt64ToString(lo, hi) {
  ({ lo, hi } = toUnsigned(lo, hi));
  if (hi <= 2097151) {
    return String(TWO_PWR_32_DBL * hi + lo);
  }
  const low = lo & 16777215;
  const mid = (lo >>> 24 | hi << 8) & 16777215;
  const high = hi >> 16 & 65535;
  let digitA = low + mid * 6777216 + high * 6710656;
  let digitB = mid + high * 8147497;
  let digitC = high * 2;
  const base = 1e7;
  if (digitA >= base) {
    digitB += Math.floor(digitA / base);
    digitA %= base;
  }
  if (digitB >= base) {
    digitC += Math.floor(digitB / base);
    digitB %= base;
  }
  return digitC.toString() + decimalFrom1e7WithLeadingZeros(digitB) + decimalFrom1e7WithLeadingZeros(digitA);
}
function toUnsigned(lo, hi) {
  return { lo: lo >>> 0, hi: hi >>> 0 };
}
function newBits(lo, hi) {
  return { lo: lo | 0, hi: hi | 0 };
}
function negate(lowBits, highBits) {
  highBits = ~highBits;
  if (lowBits) {
    lowBits = ~lowBits + 1;
  } else {
    highBits += 1;
  }
  return newBits(lowBits, highBits);
}
var decimalFrom1e7WithLeadingZeros = (digit1e7) => {
  const partial = String(digit1e7);
  return "0000000".slice(partial.length) + partial;
};
function varint32write(value, bytes) {
  if (value >>> 0 < 128) {
    bytes.push(value);
    return;
  }
  if (value >= 0) {
    while (value > 127) {
      bytes.push(value & 127 | 128);
      value = value >>> 7;
    }
    bytes.push(value);
  } else {
    for (let i = 0; i < 9; i++) {
      bytes.push(value & 127 | 128);
      value = value >> 7;
    }
    bytes.push(1);
  }
}
function varint32read() {
  let b = this.buf[this.pos++];
  if ((b & 128) === 0) {
    this.assertBounds();
    return b;
  }
  let result = b & 127;
  b = this.buf[this.pos++];
  result |= (b & 127) << 7;
  if ((b & 128) === 0) {
    this.assertBounds();
    return result;
  }
  b = this.buf[this.pos++];
  result |= (b & 127) << 14;
  if ((b & 128) === 0) {
    this.assertBounds();
    return result;
  }
  b = this.buf[this.pos++];
  result |= (b & 127) << 21;
  if ((b & 128) === 0) {
    this.assertBounds();
    return result;
  }
  b = this.buf[this.pos++];
  result |= (b & 15) << 28;
  for (let readBytes = 5; (b & 128) !== 0 && readBytes < 10; readBytes++)
    b = this.buf[this.pos++];
  if ((b & 128) !== 0)
    throw new Error("invalid varint");
  this.assertBounds();
  return result >>> 0;
}

// node_modules/@bufbuild/protobuf/dist/esm/proto-int64.js
var protoInt64 = /* @__PURE__ */ makeInt64Support();
function makeInt64Support() {
  const dv = new DataView(new ArrayBuffer(8));
  const ok = typeof BigInt === "function" && typeof dv.getBigInt64 === "function" && typeof dv.getBigUint64 === "function" && typeof dv.setBigInt64 === "function" && typeof dv.setBigUint64 === "function" && (!!globalThis.Deno || !!globalThis.Bun || typeof process != "object" || typeof process.env != "object" || process.env.BUF_BIGINT_DISABLE !== "1");
  if (ok) {
    const MIN = BigInt("-9223372036854775808");
    const MAX = BigInt("9223372036854775807");
    const UMIN = BigInt("0");
    const UMAX = BigInt("18446744073709551615");
    return {
      zero: BigInt(0),
      supported: true,
      parse(value) {
        const bi = typeof value == "bigint" ? value : BigInt(value);
        if (bi > MAX || bi < MIN) {
          throw new Error(`invalid int64: ${value}`);
        }
        return bi;
      },
      uParse(value) {
        const bi = typeof value == "bigint" ? value : BigInt(value);
        if (bi > UMAX || bi < UMIN) {
          throw new Error(`invalid uint64: ${value}`);
        }
        return bi;
      },
      enc(value) {
        dv.setBigInt64(0, this.parse(value), true);
        return {
          lo: dv.getInt32(0, true),
          hi: dv.getInt32(4, true)
        };
      },
      uEnc(value) {
        dv.setBigInt64(0, this.uParse(value), true);
        return {
          lo: dv.getInt32(0, true),
          hi: dv.getInt32(4, true)
        };
      },
      dec(lo, hi) {
        dv.setInt32(0, lo, true);
        dv.setInt32(4, hi, true);
        return dv.getBigInt64(0, true);
      },
      uDec(lo, hi) {
        dv.setInt32(0, lo, true);
        dv.setInt32(4, hi, true);
        return dv.getBigUint64(0, true);
      }
    };
  }
  return {
    zero: "0",
    supported: false,
    parse(value) {
      if (typeof value != "string") {
        value = value.toString();
      }
      assertInt64String(value);
      return value;
    },
    uParse(value) {
      if (typeof value != "string") {
        value = value.toString();
      }
      assertUInt64String(value);
      return value;
    },
    enc(value) {
      if (typeof value != "string") {
        value = value.toString();
      }
      assertInt64String(value);
      return int64FromString(value);
    },
    uEnc(value) {
      if (typeof value != "string") {
        value = value.toString();
      }
      assertUInt64String(value);
      return int64FromString(value);
    },
    dec(lo, hi) {
      return int64ToString(lo, hi);
    },
    uDec(lo, hi) {
      return uInt64ToString(lo, hi);
    }
  };
}
function assertInt64String(value) {
  if (!/^-?[0-9]+$/.test(value)) {
    throw new Error("invalid int64: " + value);
  }
}
function assertUInt64String(value) {
  if (!/^[0-9]+$/.test(value)) {
    throw new Error("invalid uint64: " + value);
  }
}

// node_modules/@bufbuild/protobuf/dist/esm/reflect/scalar.js
function scalarZeroValue(type, longAsString) {
  switch (type) {
    case ScalarType.STRING:
      return "";
    case ScalarType.BOOL:
      return false;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return 0;
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SFIXED64:
    case ScalarType.FIXED64:
    case ScalarType.SINT64:
      return longAsString ? "0" : protoInt64.zero;
    case ScalarType.BYTES:
      return new Uint8Array(0);
    default:
      return 0;
  }
}

// node_modules/@bufbuild/protobuf/dist/esm/reflect/unsafe.js
function unsafeIsSetExplicit(target, localName) {
  return Object.prototype.hasOwnProperty.call(target, localName) && target[localName] !== void 0;
}
function setOwn(obj, key, value) {
  if (key === "__proto__") {
    Object.defineProperty(obj, "__proto__", {
      value,
      writable: true,
      enumerable: true,
      configurable: true
    });
  } else {
    obj[key] = value;
  }
}

// node_modules/@bufbuild/protobuf/dist/esm/reflect/guard.js
function isObject(arg) {
  return arg !== null && typeof arg == "object" && !Array.isArray(arg);
}

// node_modules/@bufbuild/protobuf/dist/esm/wkt/wrappers.js
function isWrapperDesc(messageDesc2) {
  const f = messageDesc2.fields[0];
  return isWrapperTypeName(messageDesc2.typeName) && f !== void 0 && f.fieldKind == "scalar" && f.name == "value" && f.number == 1;
}
var wrapperTypeNames = /* @__PURE__ */ new Set([
  "google.protobuf.DoubleValue",
  "google.protobuf.FloatValue",
  "google.protobuf.Int64Value",
  "google.protobuf.UInt64Value",
  "google.protobuf.Int32Value",
  "google.protobuf.UInt32Value",
  "google.protobuf.BoolValue",
  "google.protobuf.StringValue",
  "google.protobuf.BytesValue"
]);
function isWrapperTypeName(name) {
  return wrapperTypeNames.has(name);
}

// node_modules/@bufbuild/protobuf/dist/esm/create.js
var EDITION_PROTO3 = 999;
var EDITION_PROTO2 = 998;
var IMPLICIT = 2;
function create(schema, init) {
  if (isMessage(init, schema)) {
    return init;
  }
  return compiledCreate(schema)(init);
}
var compiledCreates = /* @__PURE__ */ new WeakMap();
function compiledCreate(desc) {
  let compiled = compiledCreates.get(desc);
  if (compiled === void 0) {
    compiled = compileCreate(desc);
    compiledCreates.set(desc, compiled);
  }
  return compiled;
}
var INIT_SINGULAR = 0;
var INIT_LIST = 1;
var INIT_MAP = 2;
var INIT_ONEOF = 3;
function compileCreate(desc) {
  const typeName = desc.typeName;
  const { properties, prototype } = compileInitMessage(desc);
  return (init) => {
    let message;
    if (prototype !== void 0) {
      message = Object.create(prototype);
      message.$typeName = typeName;
    } else {
      message = { $typeName: typeName };
    }
    for (let i = 0; i < properties.length; i++) {
      const property = properties[i];
      const name = property.name;
      const initValue = init === null || init === void 0 ? void 0 : init[name];
      switch (property.kind) {
        case INIT_SINGULAR:
          if (initValue != null) {
            message[name] = property.convert !== void 0 ? property.convert(initValue) : initValue;
          } else if (property.constant !== void 0) {
            message[name] = property.constant;
          }
          break;
        case INIT_LIST:
          message[name] = property.convert !== void 0 && Array.isArray(initValue) ? initValue.map(property.convert) : initValue !== null && initValue !== void 0 ? initValue : [];
          break;
        case INIT_MAP:
          if (property.convert === void 0 || !isObject(initValue)) {
            message[name] = initValue !== null && initValue !== void 0 ? initValue : {};
          } else {
            const converted = {};
            const keys = Object.keys(initValue);
            for (let k = 0; k < keys.length; k++) {
              setOwn(converted, keys[k], property.convert(initValue[keys[k]]));
            }
            message[name] = converted;
          }
          break;
        case INIT_ONEOF: {
          const oneofValue = initValue;
          if ((oneofValue === null || oneofValue === void 0 ? void 0 : oneofValue.case) != null) {
            const convert = property.convert.get(oneofValue.case);
            if (convert !== void 0) {
              message[name] = {
                case: oneofValue.case,
                value: convert(oneofValue.value)
              };
              break;
            }
          }
          message[name] = { case: void 0 };
          break;
        }
      }
    }
    return message;
  };
}
function compileInitMessage(desc) {
  var _a, _b;
  const properties = [];
  const prototype = {};
  const usePrototype = needsPrototypeChain(desc);
  for (const member of desc.members) {
    const name = member.localName;
    if (member.kind == "oneof") {
      properties.push({
        name,
        kind: INIT_ONEOF,
        constant: void 0,
        convert: compileConvertOneof(member)
      });
      continue;
    }
    switch (member.fieldKind) {
      case "message": {
        properties.push({
          name,
          kind: INIT_SINGULAR,
          constant: void 0,
          convert: compileConvertMessage(member)
        });
        break;
      }
      case "list": {
        properties.push({
          name,
          kind: INIT_LIST,
          constant: void 0,
          convert: member.listKind == "message" ? (_a = compileConvertMessage(member)) !== null && _a !== void 0 ? _a : ((value) => value) : member.scalar == ScalarType.BYTES ? toU8Arr : void 0
        });
        break;
      }
      case "map": {
        properties.push({
          name,
          kind: INIT_MAP,
          constant: void 0,
          convert: member.mapKind == "message" ? (_b = compileConvertMessage(member)) !== null && _b !== void 0 ? _b : ((value) => value) : member.scalar == ScalarType.BYTES ? toU8Arr : void 0
        });
        break;
      }
      default: {
        const zeroValue = createZeroValue(member);
        properties.push({
          name,
          kind: INIT_SINGULAR,
          constant: member.presence == IMPLICIT ? zeroValue : void 0,
          convert: member.fieldKind == "scalar" && member.scalar == ScalarType.BYTES ? toU8Arr : void 0
        });
        if (usePrototype) {
          prototype[name] = zeroValue;
        }
        break;
      }
    }
  }
  return {
    properties,
    prototype: usePrototype ? prototype : void 0
  };
}
function compileConvertOneof(oneof) {
  const converters = /* @__PURE__ */ new Map();
  for (const field of oneof.fields) {
    let convert;
    if (field.fieldKind == "message") {
      convert = compileConvertMessage(field);
    } else if (field.fieldKind == "scalar" && field.scalar == ScalarType.BYTES) {
      convert = toU8Arr;
    }
    converters.set(field.localName, convert !== null && convert !== void 0 ? convert : ((value) => value));
  }
  return converters;
}
function compileConvertMessage(field) {
  if (field.fieldKind == "message" && !field.oneof && isWrapperDesc(field.message)) {
    return field.message.fields[0].scalar == ScalarType.BYTES ? toU8Arr : void 0;
  }
  if (field.message.typeName == "google.protobuf.Struct" && field.parent.typeName !== "google.protobuf.Value") {
    return void 0;
  }
  const messageDesc2 = field.message;
  let compiled;
  return (value) => {
    if (!isObject(value) || isMessage(value, messageDesc2)) {
      return value;
    }
    compiled !== null && compiled !== void 0 ? compiled : compiled = compiledCreate(messageDesc2);
    return compiled(value);
  };
}
function toU8Arr(value) {
  return Array.isArray(value) ? new Uint8Array(value) : value;
}
function needsPrototypeChain(desc) {
  switch (desc.file.edition) {
    case EDITION_PROTO3:
      return false;
    case EDITION_PROTO2:
      return true;
    default:
      return desc.fields.some((f) => f.presence != IMPLICIT && f.fieldKind != "message" && !f.oneof);
  }
}
function createZeroValue(field) {
  const defaultValue = field.getDefaultValue();
  if (defaultValue !== void 0) {
    return field.fieldKind == "scalar" && field.longAsString ? defaultValue.toString() : defaultValue;
  }
  return field.fieldKind == "scalar" ? scalarZeroValue(field.scalar, field.longAsString) : field.enum.values[0].number;
}

// node_modules/@bufbuild/protobuf/dist/esm/reflect/error.js
var FieldError = class extends Error {
  constructor(fieldOrOneof, message, name = "FieldValueInvalidError") {
    super(message);
    this.name = name;
    this.field = () => fieldOrOneof;
  }
};

// node_modules/@bufbuild/protobuf/dist/esm/wire/text-encoding.js
var te;
function configureTextEncoding(textEncoding) {
  var _a;
  te = Object.assign(Object.assign({}, textEncoding), { encodeUtf8Into: (_a = textEncoding.encodeUtf8Into) !== null && _a !== void 0 ? _a : emulateEncodeInto(textEncoding.encodeUtf8.bind(textEncoding)) });
}
function getTextEncoding() {
  if (!te) {
    const globals = globalThis;
    if (!globals.TextEncoder || !globals.TextDecoder) {
      throw new Error("encoding API missing: install TextEncoder and TextDecoder on globalThis");
    }
    const textEncoder = new globals.TextEncoder();
    const textDecoder = new globals.TextDecoder("utf-8", {
      ignoreBOM: true
    });
    let textDecoderStrict;
    const config = {
      encodeUtf8(text) {
        return textEncoder.encode(text);
      },
      decodeUtf8(bytes, strict) {
        if (strict) {
          if (!textDecoderStrict) {
            textDecoderStrict = new globals.TextDecoder("utf-8", {
              fatal: true,
              ignoreBOM: true
            });
          }
          return textDecoderStrict.decode(bytes);
        }
        return textDecoder.decode(bytes);
      },
      checkUtf8(text) {
        try {
          encodeURIComponent(text);
          return true;
        } catch (_) {
          return false;
        }
      }
    };
    if (textEncoder.encodeInto) {
      config.encodeUtf8Into = textEncoder.encodeInto.bind(textEncoder);
    }
    const nativeStringIsWellFormed = String.prototype.isWellFormed;
    if (nativeStringIsWellFormed) {
      config.checkUtf8 = (text) => {
        return nativeStringIsWellFormed.call(text);
      };
    }
    configureTextEncoding(config);
  }
  return te;
}
function emulateEncodeInto(encodeUtf8) {
  return (text, dest) => {
    const bytes = encodeUtf8(text);
    dest.set(bytes);
    return { written: bytes.byteLength };
  };
}

// node_modules/@bufbuild/protobuf/dist/esm/wire/binary-encoding.js
var WireType;
(function(WireType2) {
  WireType2[WireType2["Varint"] = 0] = "Varint";
  WireType2[WireType2["Bit64"] = 1] = "Bit64";
  WireType2[WireType2["LengthDelimited"] = 2] = "LengthDelimited";
  WireType2[WireType2["StartGroup"] = 3] = "StartGroup";
  WireType2[WireType2["EndGroup"] = 4] = "EndGroup";
  WireType2[WireType2["Bit32"] = 5] = "Bit32";
})(WireType || (WireType = {}));
var UINT32_MAX = 4294967295;
var INT32_MAX = 2147483647;
var INT32_MIN = -2147483648;
var BinaryWriter = class {
  constructor(encodeUtf8) {
    this.stackPos = [];
    this.encodeUtf8Into = encodeUtf8 ? emulateEncodeInto(encodeUtf8) : getTextEncoding().encodeUtf8Into;
    this.buffer = EMPTY_BUFFER;
    this.viewCache = EMPTY_VIEW;
    this.pos = 0;
  }
  ensureCapacity(size) {
    const required = this.pos + size;
    if (required > this.buffer.length) {
      let newLen = this.buffer.length || INITIAL_SIZE;
      while (newLen < required)
        newLen *= 2;
      const newBuf = new Uint8Array(newLen);
      if (this.pos > 0)
        newBuf.set(this.buffer);
      this.buffer = newBuf;
    }
  }
  /**
   * The DataView over `buffer`, rebuilt only if the buffer has grown since it
   * was last used.
   */
  view() {
    const bytes = this.buffer;
    const view = this.viewCache;
    if (view.byteLength === bytes.byteLength)
      return view;
    const newView = new DataView(bytes.buffer);
    this.viewCache = newView;
    return newView;
  }
  /**
   * Return all bytes written and reset this writer.
   */
  finish() {
    const result = this.buffer.slice(0, this.pos);
    this.pos = 0;
    this.stackPos = [];
    return result;
  }
  /**
   * Start a new fork for length-delimited data like a message
   * or a packed repeated field.
   *
   * Must be joined later with `join()`.
   */
  fork() {
    this.stackPos.push(this.pos);
    this.ensureCapacity(DEFAULT_LEN_PREFIX_SIZE);
    this.buffer[this.pos++] = 0;
    return this;
  }
  /**
   * Join the last fork. Write its length and bytes, then
   * return to the previous state.
   */
  join() {
    const forkPos = this.stackPos.pop();
    if (forkPos === void 0)
      throw new Error("invalid state, fork stack empty");
    const len = this.pos - forkPos - DEFAULT_LEN_PREFIX_SIZE;
    const lenPrefixSize = varint32Size(len);
    if (lenPrefixSize > DEFAULT_LEN_PREFIX_SIZE) {
      this.ensureCapacity(lenPrefixSize - DEFAULT_LEN_PREFIX_SIZE);
      this.buffer.copyWithin(forkPos + lenPrefixSize, forkPos + DEFAULT_LEN_PREFIX_SIZE, this.pos);
    }
    this.pos = forkPos;
    this.uint32(len);
    this.pos += len;
    return this;
  }
  /**
   * Writes a tag (field number and wire type).
   *
   * Equivalent to `uint32( (fieldNo << 3 | type) >>> 0 )`.
   *
   * Generated code should compute the tag ahead of time and call `uint32()`.
   */
  tag(fieldNo, type) {
    return this.uint32((fieldNo << 3 | type) >>> 0);
  }
  /**
   * Write a chunk of raw bytes.
   */
  raw(chunk) {
    this.ensureCapacity(chunk.length);
    this.buffer.set(chunk, this.pos);
    this.pos += chunk.length;
    return this;
  }
  /**
   * Write a `uint32` value, an unsigned 32 bit varint.
   */
  uint32(value) {
    assertUInt32(value);
    this.ensureCapacity(5);
    if (value < 128) {
      this.buffer[this.pos++] = value;
      return this;
    }
    while (value > 127) {
      this.buffer[this.pos++] = value & 127 | 128;
      value >>>= 7;
    }
    this.buffer[this.pos++] = value;
    return this;
  }
  /**
   * Write a `int32` value, a signed 32 bit varint.
   */
  int32(value) {
    assertInt32(value);
    if (value >= 0) {
      return this.uint32(value);
    }
    this.ensureCapacity(10);
    for (let i = 0; i < 9; i++) {
      this.buffer[this.pos++] = value & 127 | 128;
      value >>= 7;
    }
    this.buffer[this.pos++] = 1;
    return this;
  }
  /**
   * Write a `bool` value, a varint.
   */
  bool(value) {
    this.ensureCapacity(1);
    this.buffer[this.pos++] = value ? 1 : 0;
    return this;
  }
  /**
   * Write a `bytes` value, length-delimited arbitrary data.
   */
  bytes(value) {
    this.uint32(value.byteLength);
    return this.raw(value);
  }
  /**
   * Write a `string` value, length-delimited data converted to UTF-8 text.
   */
  string(value) {
    if (typeof value !== "string") {
      value = String(value);
    }
    const len = value.length;
    if (len <= ASCII_MAX_LENGTH) {
      this.ensureCapacity(len + 1);
      const ascii = this.buffer;
      let pos = this.pos;
      ascii[pos++] = len;
      let i = 0;
      for (; i < len; i++) {
        const code = value.charCodeAt(i);
        if (code > 127)
          break;
        ascii[pos++] = code;
      }
      if (i == len) {
        this.pos = pos;
        return this;
      }
    }
    this.ensureCapacity(len * 3 + 5);
    const lenPrefixSizeGuess = varint32Size(len);
    const buf = this.buffer;
    const start = this.pos;
    const { written } = this.encodeUtf8Into(value, buf.subarray(start + lenPrefixSizeGuess));
    const lenPrefixSize = varint32Size(written);
    if (lenPrefixSize != lenPrefixSizeGuess) {
      buf.copyWithin(start + lenPrefixSize, start + lenPrefixSizeGuess, start + lenPrefixSizeGuess + written);
    }
    this.uint32(written);
    this.pos += written;
    return this;
  }
  /**
   * Write a `float` value, 32-bit floating point number.
   */
  float(value) {
    assertFloat32(value);
    this.ensureCapacity(4);
    this.view().setFloat32(this.pos, value, true);
    this.pos += 4;
    return this;
  }
  /**
   * Write a `double` value, a 64-bit floating point number.
   */
  double(value) {
    this.ensureCapacity(8);
    this.view().setFloat64(this.pos, value, true);
    this.pos += 8;
    return this;
  }
  /**
   * Write a `fixed32` value, an unsigned, fixed-length 32-bit integer.
   */
  fixed32(value) {
    assertUInt32(value);
    this.ensureCapacity(4);
    this.view().setUint32(this.pos, value, true);
    this.pos += 4;
    return this;
  }
  /**
   * Write a `sfixed32` value, a signed, fixed-length 32-bit integer.
   */
  sfixed32(value) {
    assertInt32(value);
    this.ensureCapacity(4);
    this.view().setInt32(this.pos, value, true);
    this.pos += 4;
    return this;
  }
  /**
   * Write a `sint32` value, a signed, zigzag-encoded 32-bit varint.
   */
  sint32(value) {
    assertInt32(value);
    return this.uint32((value << 1 ^ value >> 31) >>> 0);
  }
  /**
   * Write a `sfixed64` value, a signed, fixed-length 64-bit integer.
   */
  sfixed64(value) {
    const tc = protoInt64.enc(value);
    this.ensureCapacity(8);
    const view = this.view();
    view.setInt32(this.pos, tc.lo, true);
    view.setInt32(this.pos + 4, tc.hi, true);
    this.pos += 8;
    return this;
  }
  /**
   * Write a `fixed64` value, an unsigned, fixed-length 64 bit integer.
   */
  fixed64(value) {
    const tc = protoInt64.uEnc(value);
    this.ensureCapacity(8);
    const view = this.view();
    view.setInt32(this.pos, tc.lo, true);
    view.setInt32(this.pos + 4, tc.hi, true);
    this.pos += 8;
    return this;
  }
  /**
   * Write a `int64` value, a signed 64-bit varint.
   */
  int64(value) {
    const tc = protoInt64.enc(value);
    return this.writeVarint64(tc.lo, tc.hi);
  }
  /**
   * Write a `sint64` value, a signed, zig-zag-encoded 64-bit varint.
   */
  sint64(value) {
    const tc = protoInt64.enc(value), sign = tc.hi >> 31, lo = tc.lo << 1 ^ sign, hi = (tc.hi << 1 | tc.lo >>> 31) ^ sign;
    return this.writeVarint64(lo, hi);
  }
  /**
   * Write a `uint64` value, an unsigned 64-bit varint.
   */
  uint64(value) {
    const tc = protoInt64.uEnc(value);
    return this.writeVarint64(tc.lo, tc.hi);
  }
  /**
   * Write a 64-bit varint directly into the buffer. Accepts the value as
   * split low/high 32-bit words.
   *
   * Ported from varint64write() to avoid the intermediate number[] buffer.
   * See https://github.com/protocolbuffers/protobuf/blob/8a71927d74a4ce34efe2d8769fda198f52d20d12/js/experimental/runtime/kernel/writer.js#L344
   */
  writeVarint64(lo, hi) {
    this.ensureCapacity(10);
    const buf = this.buffer;
    let pos = this.pos;
    for (let i = 0; i < 28; i = i + 7) {
      const shift = lo >>> i;
      const hasNext = !(shift >>> 7 == 0 && hi == 0);
      buf[pos++] = (hasNext ? shift | 128 : shift) & 255;
      if (!hasNext) {
        this.pos = pos;
        return this;
      }
    }
    const splitBits = lo >>> 28 & 15 | (hi & 7) << 4;
    const hasMoreBits = !(hi >> 3 == 0);
    buf[pos++] = (hasMoreBits ? splitBits | 128 : splitBits) & 255;
    if (!hasMoreBits) {
      this.pos = pos;
      return this;
    }
    for (let i = 3; i < 31; i = i + 7) {
      const shift = hi >>> i;
      const hasNext = !(shift >>> 7 == 0);
      buf[pos++] = (hasNext ? shift | 128 : shift) & 255;
      if (!hasNext) {
        this.pos = pos;
        return this;
      }
    }
    buf[pos++] = hi >>> 31 & 1;
    this.pos = pos;
    return this;
  }
};
var INITIAL_SIZE = 128;
var DEFAULT_LEN_PREFIX_SIZE = 1;
var EMPTY_BUFFER = new Uint8Array(0);
var EMPTY_VIEW = new DataView(EMPTY_BUFFER.buffer);
var ASCII_MAX_LENGTH = 32;
function varint32Size(value) {
  if (value < 128)
    return 1;
  if (value < 16384)
    return 2;
  if (value < 2097152)
    return 3;
  if (value < 268435456)
    return 4;
  return 5;
}
var BinaryReader = class {
  constructor(buf, decodeUtf8 = getTextEncoding().decodeUtf8) {
    this.decodeUtf8 = decodeUtf8;
    this.varint64Lo = 0;
    this.varint64Hi = 0;
    this.varint64 = varint64read;
    this.uint32 = varint32read;
    this.buf = buf;
    this.len = buf.length;
    this.pos = 0;
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  /**
   * Reads a tag - field number and wire type. Tags are uint32 varints; values
   * that do not fit in uint32 are rejected.
   */
  tag() {
    const start = this.pos;
    const tag = this.uint32();
    const bytesRead = this.pos - start;
    if (bytesRead > 5 || bytesRead == 5 && this.buf[this.pos - 1] > 15) {
      throw new Error("illegal tag: varint overflows uint32");
    }
    const fieldNo = tag >>> 3;
    const wireType = tag & 7;
    if (fieldNo <= 0 || wireType > 5) {
      throw new Error("illegal tag: field no " + fieldNo + " wire type " + wireType);
    }
    return [fieldNo, wireType];
  }
  /**
   * Skip one element and return the skipped data.
   *
   * When skipping StartGroup, provide the tags field number to check for
   * matching field number in the EndGroup tag. Recursion into nested groups
   * is guarded by the `recursionLimit` argument: When the limit is reached,
   * this method throws.
   */
  skip(wireType, fieldNo, recursionLimit = 100) {
    let start = this.pos;
    switch (wireType) {
      case WireType.Varint:
        while (this.buf[this.pos++] & 128) {
        }
        break;
      // @ts-ignore TS7029: Fallthrough case in switch -- ignore instead of expect-error for compiler settings without noFallthroughCasesInSwitch: true
      case WireType.Bit64:
        this.pos += 4;
      case WireType.Bit32:
        this.pos += 4;
        break;
      case WireType.LengthDelimited:
        let len = this.uint32();
        this.pos += len;
        break;
      case WireType.StartGroup:
        if (recursionLimit <= 0) {
          throw new Error("maximum recursion depth reached");
        }
        for (; ; ) {
          const [fn, wt] = this.tag();
          if (wt === WireType.EndGroup) {
            if (fieldNo !== void 0 && fn !== fieldNo) {
              throw new Error("invalid end group tag");
            }
            break;
          }
          this.skip(wt, fn, recursionLimit - 1);
        }
        break;
      default:
        throw new Error("cant skip wire type " + wireType);
    }
    this.assertBounds();
    return this.buf.subarray(start, this.pos);
  }
  /**
   * Throws error if position in byte array is out of range.
   */
  assertBounds() {
    if (this.pos > this.len)
      throw new RangeError("premature EOF");
  }
  /**
   * Read a `int32` field, a signed 32 bit varint.
   */
  int32() {
    return this.uint32() | 0;
  }
  /**
   * Read a `sint32` field, a signed, zigzag-encoded 32-bit varint.
   */
  sint32() {
    let zze = this.uint32();
    return zze >>> 1 ^ -(zze & 1);
  }
  /**
   * Read a `int64` field, a signed 64-bit varint.
   */
  int64() {
    this.varint64();
    return protoInt64.dec(this.varint64Lo, this.varint64Hi);
  }
  /**
   * Read a `uint64` field, an unsigned 64-bit varint.
   */
  uint64() {
    this.varint64();
    return protoInt64.uDec(this.varint64Lo, this.varint64Hi);
  }
  /**
   * Read a `sint64` field, a signed, zig-zag-encoded 64-bit varint.
   */
  sint64() {
    this.varint64();
    let lo = this.varint64Lo;
    let hi = this.varint64Hi;
    let s = -(lo & 1);
    lo = (lo >>> 1 | (hi & 1) << 31) ^ s;
    hi = hi >>> 1 ^ s;
    return protoInt64.dec(lo, hi);
  }
  /**
   * Read a `bool` field, a variant.
   */
  bool() {
    const b = this.buf[this.pos];
    if (b < 128) {
      this.pos++;
      return b !== 0;
    }
    this.varint64();
    return this.varint64Lo !== 0 || this.varint64Hi !== 0;
  }
  /**
   * Read a `fixed32` field, an unsigned, fixed-length 32-bit integer.
   */
  fixed32() {
    return this.view.getUint32((this.pos += 4) - 4, true);
  }
  /**
   * Read a `sfixed32` field, a signed, fixed-length 32-bit integer.
   */
  sfixed32() {
    return this.view.getInt32((this.pos += 4) - 4, true);
  }
  /**
   * Read a `fixed64` field, an unsigned, fixed-length 64 bit integer.
   */
  fixed64() {
    return protoInt64.uDec(this.sfixed32(), this.sfixed32());
  }
  /**
   * Read a `fixed64` field, a signed, fixed-length 64-bit integer.
   */
  sfixed64() {
    return protoInt64.dec(this.sfixed32(), this.sfixed32());
  }
  /**
   * Read a `float` field, 32-bit floating point number.
   */
  float() {
    return this.view.getFloat32((this.pos += 4) - 4, true);
  }
  /**
   * Read a `double` field, a 64-bit floating point number.
   */
  double() {
    return this.view.getFloat64((this.pos += 8) - 8, true);
  }
  /**
   * Read a `bytes` field, length-delimited arbitrary data.
   */
  bytes() {
    let len = this.uint32(), start = this.pos;
    this.pos += len;
    this.assertBounds();
    return this.buf.subarray(start, start + len);
  }
  /**
   * Read a `string` field, length-delimited data converted to UTF-8 text. If
   * `strict` is true, throw on invalid UTF-8 instead of substituting U+FFFD.
   */
  string(strict) {
    const len = this.uint32();
    const start = this.pos;
    this.pos += len;
    this.assertBounds();
    const buf = this.buf;
    if (len <= ASCII_MAX_LENGTH) {
      const codes = new Array(len);
      for (let i = 0; i < len; i++) {
        const byte = buf[start + i];
        if (byte > 127) {
          return this.decodeUtf8(buf.subarray(start, this.pos), strict);
        }
        codes[i] = byte;
      }
      return String.fromCharCode.apply(String, codes);
    }
    return this.decodeUtf8(buf.subarray(start, this.pos), strict);
  }
};
function assertInt32(arg) {
  if (typeof arg == "string") {
    arg = Number(arg);
  } else if (typeof arg != "number") {
    throw new Error("invalid int32: " + typeof arg);
  }
  if (!Number.isInteger(arg) || arg > INT32_MAX || arg < INT32_MIN)
    throw new Error("invalid int32: " + arg);
}
function assertUInt32(arg) {
  if (typeof arg == "string") {
    arg = Number(arg);
  } else if (typeof arg != "number") {
    throw new Error("invalid uint32: " + typeof arg);
  }
  if (!Number.isInteger(arg) || arg > UINT32_MAX || arg < 0)
    throw new Error("invalid uint32: " + arg);
}
function assertFloat32(arg) {
  if (typeof arg == "string") {
    const o = arg;
    arg = Number(arg);
    if (Number.isNaN(arg) && o !== "NaN") {
      throw new Error("invalid float32: " + o);
    }
  } else if (typeof arg != "number") {
    throw new Error("invalid float32: " + typeof arg);
  }
  if (!Number.isFinite(Math.fround(arg)) && Number.isFinite(arg)) {
    throw new Error("invalid float32: " + arg);
  }
}

// node_modules/@bufbuild/protobuf/dist/esm/reflect/message.js
var NULL_VALUE = 0;
function localMessageMapper(field) {
  if (usesJsonRepresentation(field)) {
    return {
      toMessage: (local) => wktStructToReflect(local),
      toLocal: (message) => wktStructToLocal(message)
    };
  }
  if (field.fieldKind == "message" && !field.oneof && isWrapperDesc(field.message)) {
    const wrapperDesc = field.message;
    const valueLocalName = wrapperDesc.fields[0].localName;
    return {
      toMessage: (local) => {
        const message = create(wrapperDesc);
        if (local !== void 0) {
          message[valueLocalName] = local;
        }
        return message;
      },
      toLocal: (message) => message[valueLocalName]
    };
  }
  const childDesc = field.message;
  return {
    toMessage: (local) => local === void 0 ? create(childDesc) : local,
    toLocal: (message) => message
  };
}
function usesJsonRepresentation(field) {
  return field.message.typeName == "google.protobuf.Struct" && field.parent.typeName != "google.protobuf.Value";
}
function wktStructToReflect(json) {
  const struct = {
    $typeName: "google.protobuf.Struct",
    fields: {}
  };
  if (isObject(json)) {
    for (const k of Object.keys(json)) {
      setOwn(struct.fields, k, wktValueToReflect(json[k]));
    }
  }
  return struct;
}
function wktStructToLocal(val) {
  const json = {};
  for (const k of Object.keys(val.fields)) {
    setOwn(json, k, wktValueToLocal(val.fields[k]));
  }
  return json;
}
function wktValueToLocal(val) {
  switch (val.kind.case) {
    case "structValue":
      return wktStructToLocal(val.kind.value);
    case "listValue":
      return val.kind.value.values.map(wktValueToLocal);
    case "nullValue":
    case void 0:
      return null;
    default:
      return val.kind.value;
  }
}
function wktValueToReflect(json) {
  const value = {
    $typeName: "google.protobuf.Value",
    kind: { case: void 0 }
  };
  switch (typeof json) {
    case "number":
      value.kind = { case: "numberValue", value: json };
      break;
    case "string":
      value.kind = { case: "stringValue", value: json };
      break;
    case "boolean":
      value.kind = { case: "boolValue", value: json };
      break;
    case "object":
      if (json === null) {
        value.kind = { case: "nullValue", value: NULL_VALUE };
      } else if (Array.isArray(json)) {
        const listValue = {
          $typeName: "google.protobuf.ListValue",
          values: []
        };
        if (Array.isArray(json)) {
          for (const e of json) {
            listValue.values.push(wktValueToReflect(e));
          }
        }
        value.kind = {
          case: "listValue",
          value: listValue
        };
      } else {
        value.kind = {
          case: "structValue",
          value: wktStructToReflect(json)
        };
      }
      break;
  }
  return value;
}

// node_modules/@bufbuild/protobuf/dist/esm/wire/base64-encoding.js
var nativeSetFromBase64 = Uint8Array.prototype.setFromBase64;
function base64Decode(base64Str) {
  const len = base64Str.length;
  let size = len - (len + 3 >> 2);
  if ((len & 3) == 0 && base64Str[len - 1] == "=") {
    size -= base64Str[len - 2] == "=" ? 2 : 1;
  }
  const bytes = new Uint8Array(size);
  let written = -1;
  if (nativeSetFromBase64) {
    try {
      const result = nativeSetFromBase64.call(bytes, base64Str);
      if (result.read == len) {
        written = result.written;
      }
    } catch (_a) {
    }
  }
  if (written < 0) {
    written = setFromBase64(bytes, base64Str);
  }
  return written == size ? bytes : bytes.subarray(0, written);
}
function setFromBase64(bytes, base64Str) {
  const table = getDecodeTable();
  let bytePos = 0, groupPos = 0, b, p = 0;
  for (let i = 0; i < base64Str.length; i++) {
    b = table[base64Str.charCodeAt(i)];
    if (b === void 0) {
      switch (base64Str[i]) {
        // @ts-ignore TS7029: Fallthrough case in switch -- ignore instead of expect-error for compiler settings without noFallthroughCasesInSwitch: true
        case "=":
          groupPos = 0;
        // reset state when padding found
        case "\n":
        case "\r":
        case "	":
        case " ":
          continue;
        // skip white-space, and padding
        default:
          throw Error("invalid base64 string");
      }
    }
    switch (groupPos) {
      case 0:
        p = b;
        groupPos = 1;
        break;
      case 1:
        bytes[bytePos++] = p << 2 | (b & 48) >> 4;
        p = b;
        groupPos = 2;
        break;
      case 2:
        bytes[bytePos++] = (p & 15) << 4 | (b & 60) >> 2;
        p = b;
        groupPos = 3;
        break;
      case 3:
        bytes[bytePos++] = (p & 3) << 6 | b;
        groupPos = 0;
        break;
    }
  }
  if (groupPos == 1)
    throw Error("invalid base64 string");
  return bytePos;
}
var nativeToBase64 = Uint8Array.prototype.toBase64;
var encodeTableStd;
var encodeTableUrl;
var decodeTable;
function getEncodeTable(encoding) {
  if (!encodeTableStd) {
    encodeTableStd = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".split("");
    encodeTableUrl = encodeTableStd.slice(0, -2).concat("-", "_");
  }
  return encoding == "url" ? (
    // biome-ignore lint/style/noNonNullAssertion: TS fails to narrow down
    encodeTableUrl
  ) : encodeTableStd;
}
function getDecodeTable() {
  if (!decodeTable) {
    decodeTable = [];
    const encodeTable = getEncodeTable("std");
    for (let i = 0; i < encodeTable.length; i++)
      decodeTable[encodeTable[i].charCodeAt(0)] = i;
    decodeTable["-".charCodeAt(0)] = encodeTable.indexOf("+");
    decodeTable["_".charCodeAt(0)] = encodeTable.indexOf("/");
  }
  return decodeTable;
}

// node_modules/@bufbuild/protobuf/dist/esm/reflect/names.js
function protoCamelCase(snakeCase) {
  let capNext = false;
  const b = [];
  for (let i = 0; i < snakeCase.length; i++) {
    let c = snakeCase.charAt(i);
    switch (c) {
      case "_":
        capNext = true;
        break;
      case "0":
      case "1":
      case "2":
      case "3":
      case "4":
      case "5":
      case "6":
      case "7":
      case "8":
      case "9":
        b.push(c);
        capNext = false;
        break;
      default:
        if (capNext) {
          capNext = false;
          c = c.toUpperCase();
        }
        b.push(c);
        break;
    }
  }
  return b.join("");
}
var reservedObjectProperties = /* @__PURE__ */ new Set([
  // names reserved by JavaScript
  "constructor",
  "toString",
  "toJSON",
  "valueOf"
]);
function safeObjectProperty(name) {
  return reservedObjectProperties.has(name) ? name + "$" : name;
}

// node_modules/@bufbuild/protobuf/dist/esm/codegenv2/restore-json-names.js
function restoreJsonNames(message) {
  for (const f of message.field) {
    if (!unsafeIsSetExplicit(f, "jsonName")) {
      f.jsonName = protoCamelCase(f.name);
    }
  }
  message.nestedType.forEach(restoreJsonNames);
}

// node_modules/@bufbuild/protobuf/dist/esm/wire/text-format.js
function parseTextFormatEnumValue(descEnum, value) {
  const enumValue = descEnum.values.find((v) => v.name === value);
  if (!enumValue) {
    throw new Error(`cannot parse ${descEnum} default value: ${value}`);
  }
  return enumValue.number;
}
function parseTextFormatScalarValue(type, value) {
  switch (type) {
    case ScalarType.STRING:
      return value;
    case ScalarType.BYTES: {
      const u = unescapeBytesDefaultValue(value);
      if (u === false) {
        throw new Error(`cannot parse ${ScalarType[type]} default value: ${value}`);
      }
      return u;
    }
    case ScalarType.INT64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      return protoInt64.parse(value);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return protoInt64.uParse(value);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      switch (value) {
        case "inf":
          return Number.POSITIVE_INFINITY;
        case "-inf":
          return Number.NEGATIVE_INFINITY;
        case "nan":
          return Number.NaN;
        default:
          return parseFloat(value);
      }
    case ScalarType.BOOL:
      return value === "true";
    case ScalarType.INT32:
    case ScalarType.UINT32:
    case ScalarType.SINT32:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return parseInt(value, 10);
  }
}
function unescapeBytesDefaultValue(str) {
  const b = [];
  const input = {
    tail: str,
    c: "",
    next() {
      if (this.tail.length == 0) {
        return false;
      }
      this.c = this.tail[0];
      this.tail = this.tail.substring(1);
      return true;
    },
    take(n) {
      if (this.tail.length >= n) {
        const r = this.tail.substring(0, n);
        this.tail = this.tail.substring(n);
        return r;
      }
      return false;
    }
  };
  while (input.next()) {
    switch (input.c) {
      case "\\":
        if (input.next()) {
          switch (input.c) {
            case "\\":
              b.push(input.c.charCodeAt(0));
              break;
            case "b":
              b.push(8);
              break;
            case "f":
              b.push(12);
              break;
            case "n":
              b.push(10);
              break;
            case "r":
              b.push(13);
              break;
            case "t":
              b.push(9);
              break;
            case "v":
              b.push(11);
              break;
            case "0":
            case "1":
            case "2":
            case "3":
            case "4":
            case "5":
            case "6":
            case "7": {
              const s = input.c;
              const t = input.take(2);
              if (t === false) {
                return false;
              }
              const n = parseInt(s + t, 8);
              if (Number.isNaN(n)) {
                return false;
              }
              b.push(n);
              break;
            }
            case "x": {
              const s = input.c;
              const t = input.take(2);
              if (t === false) {
                return false;
              }
              const n = parseInt(s + t, 16);
              if (Number.isNaN(n)) {
                return false;
              }
              b.push(n);
              break;
            }
            case "u": {
              const s = input.c;
              const t = input.take(4);
              if (t === false) {
                return false;
              }
              const n = parseInt(s + t, 16);
              if (Number.isNaN(n)) {
                return false;
              }
              const chunk = new Uint8Array(4);
              const view = new DataView(chunk.buffer);
              view.setInt32(0, n, true);
              b.push(chunk[0], chunk[1], chunk[2], chunk[3]);
              break;
            }
            case "U": {
              const s = input.c;
              const t = input.take(8);
              if (t === false) {
                return false;
              }
              const tc = protoInt64.uEnc(s + t);
              const chunk = new Uint8Array(8);
              const view = new DataView(chunk.buffer);
              view.setInt32(0, tc.lo, true);
              view.setInt32(4, tc.hi, true);
              b.push(chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7]);
              break;
            }
          }
        }
        break;
      default:
        b.push(input.c.charCodeAt(0));
    }
  }
  return new Uint8Array(b);
}

// node_modules/@bufbuild/protobuf/dist/esm/reflect/nested-types.js
function* nestedTypes(desc) {
  switch (desc.kind) {
    case "file":
      for (const message of desc.messages) {
        yield message;
        yield* nestedTypes(message);
      }
      yield* desc.enums;
      yield* desc.services;
      yield* desc.extensions;
      break;
    case "message":
      for (const message of desc.nestedMessages) {
        yield message;
        yield* nestedTypes(message);
      }
      yield* desc.nestedEnums;
      yield* desc.nestedExtensions;
      break;
  }
}

// node_modules/@bufbuild/protobuf/dist/esm/registry.js
function createEmbeddedFileRegistry(fileDescriptorProto, resolve) {
  return buildFileRegistry([fileDescriptorProto, resolve]);
}
function buildFileRegistry(args, check) {
  const registry = createBaseRegistry();
  if (!args.length) {
    return registry;
  }
  if ("$typeName" in args[0] && args[0].$typeName == "google.protobuf.FileDescriptorSet") {
    for (const file of args[0].file) {
      check === null || check === void 0 ? void 0 : check(file);
      addFile(file, registry);
    }
    return registry;
  }
  if ("$typeName" in args[0]) {
    let recurseDeps = function(file) {
      const deps = [];
      for (const protoFileName of file.dependency) {
        if (registry.getFile(protoFileName) != void 0) {
          continue;
        }
        if (seen.has(protoFileName)) {
          continue;
        }
        const dep = resolve(protoFileName);
        if (!dep) {
          throw new Error(`Unable to resolve ${protoFileName}, imported by ${file.name}`);
        }
        if ("kind" in dep) {
          registry.addFile(dep, false, true);
        } else {
          seen.add(dep.name);
          deps.push(dep);
        }
      }
      return deps.concat(...deps.map(recurseDeps));
    };
    const input = args[0];
    const resolve = args[1];
    const seen = /* @__PURE__ */ new Set();
    for (const file of [input, ...recurseDeps(input)].reverse()) {
      check === null || check === void 0 ? void 0 : check(file);
      addFile(file, registry);
    }
  } else {
    for (const fileReg of args) {
      for (const file of fileReg.files) {
        registry.addFile(file);
      }
    }
  }
  return registry;
}
function createBaseRegistry() {
  const types = /* @__PURE__ */ new Map();
  const extendees = /* @__PURE__ */ new Map();
  const files = /* @__PURE__ */ new Map();
  return {
    kind: "registry",
    types,
    extendees,
    [Symbol.iterator]() {
      return types.values();
    },
    get files() {
      return files.values();
    },
    addFile(file, skipTypes, withDeps) {
      files.set(file.proto.name, file);
      if (!skipTypes) {
        for (const type of nestedTypes(file)) {
          this.add(type);
        }
      }
      if (withDeps) {
        for (const f of file.dependencies) {
          this.addFile(f, skipTypes, withDeps);
        }
      }
    },
    add(desc) {
      if (desc.kind == "extension") {
        let numberToExt = extendees.get(desc.extendee.typeName);
        if (!numberToExt) {
          extendees.set(
            desc.extendee.typeName,
            // biome-ignore lint/suspicious/noAssignInExpressions: no
            numberToExt = /* @__PURE__ */ new Map()
          );
        }
        numberToExt.set(desc.number, desc);
      }
      types.set(desc.typeName, desc);
    },
    get(typeName) {
      return types.get(typeName);
    },
    getFile(fileName) {
      return files.get(fileName);
    },
    getMessage(typeName) {
      const t = types.get(typeName);
      return (t === null || t === void 0 ? void 0 : t.kind) == "message" ? t : void 0;
    },
    getEnum(typeName) {
      const t = types.get(typeName);
      return (t === null || t === void 0 ? void 0 : t.kind) == "enum" ? t : void 0;
    },
    getExtension(typeName) {
      const t = types.get(typeName);
      return (t === null || t === void 0 ? void 0 : t.kind) == "extension" ? t : void 0;
    },
    getExtensionFor(extendee, no) {
      var _a;
      return (_a = extendees.get(extendee.typeName)) === null || _a === void 0 ? void 0 : _a.get(no);
    },
    getService(typeName) {
      const t = types.get(typeName);
      return (t === null || t === void 0 ? void 0 : t.kind) == "service" ? t : void 0;
    }
  };
}
var EDITION_PROTO22 = 998;
var EDITION_PROTO32 = 999;
var EDITION_UNSTABLE = 9999;
var TYPE_STRING = 9;
var TYPE_GROUP = 10;
var TYPE_MESSAGE = 11;
var TYPE_BYTES = 12;
var TYPE_ENUM = 14;
var LABEL_REPEATED = 3;
var LABEL_REQUIRED = 2;
var JS_STRING = 1;
var IDEMPOTENCY_UNKNOWN = 0;
var EXPLICIT = 1;
var IMPLICIT2 = 2;
var LEGACY_REQUIRED = 3;
var PACKED = 1;
var DELIMITED = 2;
var OPEN = 1;
var VERIFY = 2;
var maximumEdition = 1002;
var featureDefaults = {
  // EDITION_PROTO2
  998: {
    fieldPresence: 1,
    // EXPLICIT,
    enumType: 2,
    // CLOSED,
    repeatedFieldEncoding: 2,
    // EXPANDED,
    utf8Validation: 3,
    // NONE,
    messageEncoding: 1,
    // LENGTH_PREFIXED,
    jsonFormat: 2,
    // LEGACY_BEST_EFFORT,
    enforceNamingStyle: 2,
    // STYLE_LEGACY,
    defaultSymbolVisibility: 1,
    // EXPORT_ALL,
    enforceProtoLimits: 1
    // LEGACY_NO_EXPLICIT_LIMITS,
  },
  // EDITION_PROTO3
  999: {
    fieldPresence: 2,
    // IMPLICIT,
    enumType: 1,
    // OPEN,
    repeatedFieldEncoding: 1,
    // PACKED,
    utf8Validation: 2,
    // VERIFY,
    messageEncoding: 1,
    // LENGTH_PREFIXED,
    jsonFormat: 1,
    // ALLOW,
    enforceNamingStyle: 2,
    // STYLE_LEGACY,
    defaultSymbolVisibility: 1,
    // EXPORT_ALL,
    enforceProtoLimits: 1
    // LEGACY_NO_EXPLICIT_LIMITS,
  },
  // EDITION_2023
  1e3: {
    fieldPresence: 1,
    // EXPLICIT,
    enumType: 1,
    // OPEN,
    repeatedFieldEncoding: 1,
    // PACKED,
    utf8Validation: 2,
    // VERIFY,
    messageEncoding: 1,
    // LENGTH_PREFIXED,
    jsonFormat: 1,
    // ALLOW,
    enforceNamingStyle: 2,
    // STYLE_LEGACY,
    defaultSymbolVisibility: 1,
    // EXPORT_ALL,
    enforceProtoLimits: 1
    // LEGACY_NO_EXPLICIT_LIMITS,
  },
  // EDITION_2024
  1001: {
    fieldPresence: 1,
    // EXPLICIT,
    enumType: 1,
    // OPEN,
    repeatedFieldEncoding: 1,
    // PACKED,
    utf8Validation: 2,
    // VERIFY,
    messageEncoding: 1,
    // LENGTH_PREFIXED,
    jsonFormat: 1,
    // ALLOW,
    enforceNamingStyle: 1,
    // STYLE2024,
    defaultSymbolVisibility: 2,
    // EXPORT_TOP_LEVEL,
    enforceProtoLimits: 1
    // LEGACY_NO_EXPLICIT_LIMITS,
  },
  // EDITION_2026
  1002: {
    fieldPresence: 1,
    // EXPLICIT,
    enumType: 1,
    // OPEN,
    repeatedFieldEncoding: 1,
    // PACKED,
    utf8Validation: 2,
    // VERIFY,
    messageEncoding: 1,
    // LENGTH_PREFIXED,
    jsonFormat: 1,
    // ALLOW,
    enforceNamingStyle: 3,
    // STYLE2026,
    defaultSymbolVisibility: 4,
    // STRICT,
    enforceProtoLimits: 2
    // PROTO_LIMITS2026,
  }
};
function addFile(proto, reg) {
  var _a, _b;
  const file = {
    kind: "file",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    edition: getFileEdition(proto),
    name: proto.name.replace(/\.proto$/, ""),
    dependencies: findFileDependencies(proto, reg),
    enums: [],
    messages: [],
    extensions: [],
    services: [],
    toString() {
      return `file ${proto.name}`;
    }
  };
  const mapEntriesStore = /* @__PURE__ */ new Map();
  const mapEntries = {
    get(typeName) {
      return mapEntriesStore.get(typeName);
    },
    add(desc) {
      var _a2;
      assert(((_a2 = desc.proto.options) === null || _a2 === void 0 ? void 0 : _a2.mapEntry) === true);
      mapEntriesStore.set(desc.typeName, desc);
    }
  };
  for (const enumProto of proto.enumType) {
    addEnum(enumProto, file, void 0, reg);
  }
  for (const messageProto of proto.messageType) {
    addMessage(messageProto, file, void 0, reg, mapEntries);
  }
  for (const serviceProto of proto.service) {
    addService(serviceProto, file, reg);
  }
  addExtensions(file, reg);
  for (const mapEntry of mapEntriesStore.values()) {
    addFields(mapEntry, reg, mapEntries);
  }
  for (const message of file.messages) {
    addFields(message, reg, mapEntries);
    addExtensions(message, reg);
  }
  reg.addFile(file, true);
}
function addExtensions(desc, reg) {
  switch (desc.kind) {
    case "file":
      for (const proto of desc.proto.extension) {
        const ext = newField(proto, desc, reg);
        desc.extensions.push(ext);
        reg.add(ext);
      }
      break;
    case "message":
      for (const proto of desc.proto.extension) {
        const ext = newField(proto, desc, reg);
        desc.nestedExtensions.push(ext);
        reg.add(ext);
      }
      for (const message of desc.nestedMessages) {
        addExtensions(message, reg);
      }
      break;
  }
}
function addFields(message, reg, mapEntries) {
  const allOneofs = message.proto.oneofDecl.map((proto) => newOneof(proto, message));
  const oneofsSeen = /* @__PURE__ */ new Set();
  for (const proto of message.proto.field) {
    const oneof = findOneof(proto, allOneofs);
    const field = newField(proto, message, reg, oneof, mapEntries);
    message.fields.push(field);
    message.field[field.localName] = field;
    if (oneof === void 0) {
      message.members.push(field);
    } else {
      oneof.fields.push(field);
      if (!oneofsSeen.has(oneof)) {
        oneofsSeen.add(oneof);
        message.members.push(oneof);
      }
    }
  }
  for (const oneof of allOneofs.filter((o) => oneofsSeen.has(o))) {
    message.oneofs.push(oneof);
  }
  for (const child of message.nestedMessages) {
    addFields(child, reg, mapEntries);
  }
}
function addEnum(proto, file, parent, reg) {
  var _a, _b, _c, _d, _e, _f, _g;
  var _h, _j;
  const sharedPrefix = findEnumSharedPrefix(proto.name, proto.value);
  const desc = {
    kind: "enum",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    file,
    parent,
    open: true,
    name: proto.name,
    typeName: makeTypeName(proto, parent, file),
    value: {},
    values: [],
    sharedPrefix,
    toString() {
      return `enum ${this.typeName}`;
    }
  };
  desc.open = isEnumOpen(desc);
  reg.add(desc);
  for (const p of proto.value) {
    const name = p.name;
    const value = {
      kind: "enum_value",
      proto: p,
      deprecated: (_d = (_c = p.options) === null || _c === void 0 ? void 0 : _c.deprecated) !== null && _d !== void 0 ? _d : false,
      parent: desc,
      name,
      localName: safeObjectProperty(sharedPrefix == void 0 ? name : name.substring(sharedPrefix.length)),
      number: p.number,
      jsonName: (_e = findEnumValueJsonName(p)) !== null && _e !== void 0 ? _e : name,
      toString() {
        return `enum value ${desc.typeName}.${name}`;
      }
    };
    desc.values.push(value);
    (_f = (_h = desc.value)[_j = p.number]) !== null && _f !== void 0 ? _f : _h[_j] = value;
  }
  ((_g = parent === null || parent === void 0 ? void 0 : parent.nestedEnums) !== null && _g !== void 0 ? _g : file.enums).push(desc);
}
function addMessage(proto, file, parent, reg, mapEntries) {
  var _a, _b, _c, _d;
  const desc = {
    kind: "message",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    file,
    parent,
    name: proto.name,
    typeName: makeTypeName(proto, parent, file),
    fields: [],
    field: {},
    oneofs: [],
    members: [],
    nestedEnums: [],
    nestedMessages: [],
    nestedExtensions: [],
    toString() {
      return `message ${this.typeName}`;
    }
  };
  if (((_c = proto.options) === null || _c === void 0 ? void 0 : _c.mapEntry) === true) {
    mapEntries.add(desc);
  } else {
    ((_d = parent === null || parent === void 0 ? void 0 : parent.nestedMessages) !== null && _d !== void 0 ? _d : file.messages).push(desc);
    reg.add(desc);
  }
  for (const enumProto of proto.enumType) {
    addEnum(enumProto, file, desc, reg);
  }
  for (const messageProto of proto.nestedType) {
    addMessage(messageProto, file, desc, reg, mapEntries);
  }
}
function addService(proto, file, reg) {
  var _a, _b;
  const desc = {
    kind: "service",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    file,
    name: proto.name,
    typeName: makeTypeName(proto, void 0, file),
    methods: [],
    method: {},
    toString() {
      return `service ${this.typeName}`;
    }
  };
  file.services.push(desc);
  reg.add(desc);
  for (const methodProto of proto.method) {
    const method = newMethod(methodProto, desc, reg);
    desc.methods.push(method);
    desc.method[method.localName] = method;
  }
}
function newMethod(proto, parent, reg) {
  var _a, _b, _c, _d;
  let methodKind;
  if (proto.clientStreaming && proto.serverStreaming) {
    methodKind = "bidi_streaming";
  } else if (proto.clientStreaming) {
    methodKind = "client_streaming";
  } else if (proto.serverStreaming) {
    methodKind = "server_streaming";
  } else {
    methodKind = "unary";
  }
  const input = reg.getMessage(trimLeadingDot(proto.inputType));
  const output = reg.getMessage(trimLeadingDot(proto.outputType));
  assert(input, `invalid MethodDescriptorProto: input_type ${proto.inputType} not found`);
  assert(output, `invalid MethodDescriptorProto: output_type ${proto.inputType} not found`);
  const name = proto.name;
  return {
    kind: "rpc",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    parent,
    name,
    localName: safeObjectProperty(name.length ? safeObjectProperty(name[0].toLowerCase() + name.substring(1)) : name),
    methodKind,
    input,
    output,
    idempotency: (_d = (_c = proto.options) === null || _c === void 0 ? void 0 : _c.idempotencyLevel) !== null && _d !== void 0 ? _d : IDEMPOTENCY_UNKNOWN,
    toString() {
      return `rpc ${parent.typeName}.${name}`;
    }
  };
}
function newOneof(proto, parent) {
  return {
    kind: "oneof",
    proto,
    deprecated: false,
    parent,
    fields: [],
    name: proto.name,
    localName: safeObjectProperty(protoCamelCase(proto.name)),
    toString() {
      return `oneof ${parent.typeName}.${this.name}`;
    }
  };
}
function newField(proto, parentOrFile, reg, oneof, mapEntries) {
  var _a, _b, _c;
  const isExtension = mapEntries === void 0;
  const field = {
    kind: "field",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    name: proto.name,
    number: proto.number,
    scalar: void 0,
    message: void 0,
    enum: void 0,
    presence: getFieldPresence(proto, oneof, isExtension, parentOrFile),
    utf8Validation: isUtf8Validated(proto, parentOrFile),
    listKind: void 0,
    mapKind: void 0,
    mapKey: void 0,
    delimitedEncoding: void 0,
    packed: void 0,
    longAsString: false,
    getDefaultValue: void 0
  };
  let toStr;
  if (isExtension) {
    const file = parentOrFile.kind == "file" ? parentOrFile : parentOrFile.file;
    const parent = parentOrFile.kind == "file" ? void 0 : parentOrFile;
    const typeName = makeTypeName(proto, parent, file);
    field.kind = "extension";
    field.file = file;
    field.parent = parent;
    field.oneof = void 0;
    field.typeName = typeName;
    field.jsonName = `[${typeName}]`;
    toStr = () => `extension ${typeName}`;
    const extendee = reg.getMessage(trimLeadingDot(proto.extendee));
    assert(extendee, `invalid FieldDescriptorProto: extendee ${proto.extendee} not found`);
    field.extendee = extendee;
  } else {
    const parent = parentOrFile;
    assert(parent.kind == "message");
    field.parent = parent;
    field.oneof = oneof;
    field.localName = oneof ? protoCamelCase(proto.name) : safeObjectProperty(protoCamelCase(proto.name));
    field.jsonName = proto.jsonName;
    toStr = () => `field ${parent.typeName}.${proto.name}`;
  }
  Object.defineProperty(field, "toString", {
    value: toStr,
    writable: true,
    enumerable: true,
    configurable: true
  });
  const label = proto.label;
  const type = proto.type;
  const jstype = (_c = proto.options) === null || _c === void 0 ? void 0 : _c.jstype;
  if (label === LABEL_REPEATED) {
    const mapEntry = type == TYPE_MESSAGE ? mapEntries === null || mapEntries === void 0 ? void 0 : mapEntries.get(trimLeadingDot(proto.typeName)) : void 0;
    if (mapEntry) {
      field.fieldKind = "map";
      const { key, value } = findMapEntryFields(mapEntry);
      field.mapKey = key.scalar;
      field.mapKind = value.fieldKind;
      field.message = value.message;
      field.delimitedEncoding = false;
      field.enum = value.enum;
      field.scalar = value.scalar;
      return field;
    }
    field.fieldKind = "list";
    switch (type) {
      case TYPE_MESSAGE:
      case TYPE_GROUP:
        field.listKind = "message";
        field.message = reg.getMessage(trimLeadingDot(proto.typeName));
        assert(field.message);
        field.delimitedEncoding = isDelimitedEncoding(proto, parentOrFile);
        break;
      case TYPE_ENUM:
        field.listKind = "enum";
        field.enum = reg.getEnum(trimLeadingDot(proto.typeName));
        assert(field.enum);
        break;
      default:
        field.listKind = "scalar";
        field.scalar = type;
        field.longAsString = jstype == JS_STRING;
        break;
    }
    field.packed = isPackedField(proto, parentOrFile);
    return field;
  }
  switch (type) {
    case TYPE_MESSAGE:
    case TYPE_GROUP:
      field.fieldKind = "message";
      field.message = reg.getMessage(trimLeadingDot(proto.typeName));
      assert(field.message, `invalid FieldDescriptorProto: type_name ${proto.typeName} not found`);
      field.delimitedEncoding = isDelimitedEncoding(proto, parentOrFile);
      field.getDefaultValue = () => void 0;
      break;
    case TYPE_ENUM: {
      const enumeration = reg.getEnum(trimLeadingDot(proto.typeName));
      assert(enumeration !== void 0, `invalid FieldDescriptorProto: type_name ${proto.typeName} not found`);
      field.fieldKind = "enum";
      field.enum = reg.getEnum(trimLeadingDot(proto.typeName));
      field.getDefaultValue = () => {
        return unsafeIsSetExplicit(proto, "defaultValue") ? parseTextFormatEnumValue(enumeration, proto.defaultValue) : void 0;
      };
      break;
    }
    default: {
      field.fieldKind = "scalar";
      field.scalar = type;
      field.longAsString = jstype == JS_STRING;
      field.getDefaultValue = () => {
        return unsafeIsSetExplicit(proto, "defaultValue") ? parseTextFormatScalarValue(type, proto.defaultValue) : void 0;
      };
      break;
    }
  }
  return field;
}
function getFileEdition(proto) {
  switch (proto.syntax) {
    case "":
    case "proto2":
      return EDITION_PROTO22;
    case "proto3":
      return EDITION_PROTO32;
    case "editions":
      if (proto.edition === EDITION_UNSTABLE) {
        return maximumEdition;
      }
      if (proto.edition in featureDefaults) {
        return proto.edition;
      }
      throw new Error(`${proto.name}: unsupported edition`);
    default:
      throw new Error(`${proto.name}: unsupported syntax "${proto.syntax}"`);
  }
}
function findFileDependencies(proto, reg) {
  return proto.dependency.map((wantName) => {
    const dep = reg.getFile(wantName);
    if (!dep) {
      throw new Error(`Cannot find ${wantName}, imported by ${proto.name}`);
    }
    return dep;
  });
}
function findEnumSharedPrefix(enumName, values) {
  const prefix = camelToSnakeCase(enumName) + "_";
  for (const value of values) {
    if (!value.name.toLowerCase().startsWith(prefix)) {
      return void 0;
    }
    const shortName = value.name.substring(prefix.length);
    if (shortName.length == 0) {
      return void 0;
    }
    if (/^\d/.test(shortName)) {
      return void 0;
    }
  }
  return prefix;
}
function findEnumValueJsonName(proto) {
  var _a, _b;
  const extensionNumber = 998;
  const fieldNumber = 1;
  let jsonName;
  for (const uf of (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.$unknown) !== null && _b !== void 0 ? _b : []) {
    if (uf.no !== extensionNumber || uf.wireType !== WireType.LengthDelimited) {
      continue;
    }
    const reader = new BinaryReader(new BinaryReader(uf.data).bytes());
    while (reader.pos < reader.len) {
      const [no, wireType] = reader.tag();
      if (no === fieldNumber && wireType === WireType.LengthDelimited) {
        jsonName = reader.string();
      } else {
        reader.skip(wireType, no);
      }
    }
  }
  return jsonName;
}
function camelToSnakeCase(camel) {
  return (camel.substring(0, 1) + camel.substring(1).replace(/[A-Z]/g, (c) => "_" + c)).toLowerCase();
}
function makeTypeName(proto, parent, file) {
  let typeName;
  if (parent) {
    typeName = `${parent.typeName}.${proto.name}`;
  } else if (file.proto.package.length > 0) {
    typeName = `${file.proto.package}.${proto.name}`;
  } else {
    typeName = `${proto.name}`;
  }
  return typeName;
}
function trimLeadingDot(typeName) {
  return typeName.startsWith(".") ? typeName.substring(1) : typeName;
}
function findOneof(proto, allOneofs) {
  if (!unsafeIsSetExplicit(proto, "oneofIndex")) {
    return void 0;
  }
  if (proto.proto3Optional) {
    return void 0;
  }
  const oneof = allOneofs[proto.oneofIndex];
  assert(oneof, `invalid FieldDescriptorProto: oneof #${proto.oneofIndex} for field #${proto.number} not found`);
  return oneof;
}
function getFieldPresence(proto, oneof, isExtension, parent) {
  if (proto.label == LABEL_REQUIRED) {
    return LEGACY_REQUIRED;
  }
  if (proto.label == LABEL_REPEATED) {
    return IMPLICIT2;
  }
  if (!!oneof || proto.proto3Optional) {
    return EXPLICIT;
  }
  if (isExtension) {
    return EXPLICIT;
  }
  const resolved = resolveFeature("fieldPresence", { proto, parent });
  if (resolved == IMPLICIT2 && (proto.type == TYPE_MESSAGE || proto.type == TYPE_GROUP)) {
    return EXPLICIT;
  }
  return resolved;
}
function isPackedField(proto, parent) {
  if (proto.label != LABEL_REPEATED) {
    return false;
  }
  switch (proto.type) {
    case TYPE_STRING:
    case TYPE_BYTES:
    case TYPE_GROUP:
    case TYPE_MESSAGE:
      return false;
  }
  const o = proto.options;
  if (o && unsafeIsSetExplicit(o, "packed")) {
    return o.packed;
  }
  return PACKED == resolveFeature("repeatedFieldEncoding", {
    proto,
    parent
  });
}
function findMapEntryFields(mapEntry) {
  const key = mapEntry.fields.find((f) => f.number === 1);
  const value = mapEntry.fields.find((f) => f.number === 2);
  assert(key && key.fieldKind == "scalar" && key.scalar != ScalarType.BYTES && key.scalar != ScalarType.FLOAT && key.scalar != ScalarType.DOUBLE && value && value.fieldKind != "list" && value.fieldKind != "map");
  return { key, value };
}
function isEnumOpen(desc) {
  var _a;
  return OPEN == resolveFeature("enumType", {
    proto: desc.proto,
    parent: (_a = desc.parent) !== null && _a !== void 0 ? _a : desc.file
  });
}
function isDelimitedEncoding(proto, parent) {
  if (proto.type == TYPE_GROUP) {
    return true;
  }
  return DELIMITED == resolveFeature("messageEncoding", {
    proto,
    parent
  });
}
function isUtf8Validated(proto, parent) {
  return VERIFY == resolveFeature("utf8Validation", {
    proto,
    parent
  });
}
function resolveFeature(name, ref) {
  var _a, _b;
  const featureSet = (_a = ref.proto.options) === null || _a === void 0 ? void 0 : _a.features;
  if (featureSet) {
    const val = featureSet[name];
    if (val != 0) {
      return val;
    }
  }
  if ("kind" in ref) {
    if (ref.kind == "message") {
      return resolveFeature(name, (_b = ref.parent) !== null && _b !== void 0 ? _b : ref.file);
    }
    const editionDefaults = featureDefaults[ref.edition];
    if (!editionDefaults) {
      throw new Error(`feature default for edition ${ref.edition} not found`);
    }
    return editionDefaults[name];
  }
  return resolveFeature(name, ref.parent);
}
function assert(condition, msg) {
  if (!condition) {
    throw new Error(msg);
  }
}

// node_modules/@bufbuild/protobuf/dist/esm/codegenv2/boot.js
function boot(boot2) {
  const root = bootFileDescriptorProto(boot2);
  root.messageType.forEach(restoreJsonNames);
  const reg = createEmbeddedFileRegistry(root, () => void 0);
  return reg.getFile(root.name);
}
function bootFileDescriptorProto(init) {
  const proto = /* @__PURE__ */ Object.create({
    syntax: "",
    edition: 0
  });
  return Object.assign(proto, Object.assign(Object.assign({ $typeName: "google.protobuf.FileDescriptorProto", dependency: [], publicDependency: [], weakDependency: [], optionDependency: [], service: [], extension: [] }, init), { messageType: init.messageType.map(bootDescriptorProto), enumType: init.enumType.map(bootEnumDescriptorProto) }));
}
function bootDescriptorProto(init) {
  var _a, _b, _c, _d, _e, _f, _g, _h;
  const proto = /* @__PURE__ */ Object.create({
    visibility: 0
  });
  return Object.assign(proto, {
    $typeName: "google.protobuf.DescriptorProto",
    name: init.name,
    field: (_b = (_a = init.field) === null || _a === void 0 ? void 0 : _a.map(bootFieldDescriptorProto)) !== null && _b !== void 0 ? _b : [],
    extension: [],
    nestedType: (_d = (_c = init.nestedType) === null || _c === void 0 ? void 0 : _c.map(bootDescriptorProto)) !== null && _d !== void 0 ? _d : [],
    enumType: (_f = (_e = init.enumType) === null || _e === void 0 ? void 0 : _e.map(bootEnumDescriptorProto)) !== null && _f !== void 0 ? _f : [],
    extensionRange: (_h = (_g = init.extensionRange) === null || _g === void 0 ? void 0 : _g.map((e) => Object.assign({ $typeName: "google.protobuf.DescriptorProto.ExtensionRange" }, e))) !== null && _h !== void 0 ? _h : [],
    oneofDecl: [],
    reservedRange: [],
    reservedName: []
  });
}
function bootFieldDescriptorProto(init) {
  const proto = /* @__PURE__ */ Object.create({
    label: 1,
    typeName: "",
    extendee: "",
    defaultValue: "",
    oneofIndex: 0,
    jsonName: "",
    proto3Optional: false
  });
  return Object.assign(proto, Object.assign(Object.assign({ $typeName: "google.protobuf.FieldDescriptorProto" }, init), { options: init.options ? bootFieldOptions(init.options) : void 0 }));
}
function bootFieldOptions(init) {
  var _a, _b, _c;
  const proto = /* @__PURE__ */ Object.create({
    ctype: 0,
    packed: false,
    jstype: 0,
    lazy: false,
    unverifiedLazy: false,
    deprecated: false,
    weak: false,
    debugRedact: false,
    retention: 0
  });
  return Object.assign(proto, Object.assign(Object.assign({ $typeName: "google.protobuf.FieldOptions" }, init), { targets: (_a = init.targets) !== null && _a !== void 0 ? _a : [], editionDefaults: (_c = (_b = init.editionDefaults) === null || _b === void 0 ? void 0 : _b.map((e) => Object.assign({ $typeName: "google.protobuf.FieldOptions.EditionDefault" }, e))) !== null && _c !== void 0 ? _c : [], uninterpretedOption: [] }));
}
function bootEnumDescriptorProto(init) {
  const proto = /* @__PURE__ */ Object.create({
    visibility: 0
  });
  return Object.assign(proto, {
    $typeName: "google.protobuf.EnumDescriptorProto",
    name: init.name,
    reservedName: [],
    reservedRange: [],
    value: init.value.map((e) => Object.assign({ $typeName: "google.protobuf.EnumValueDescriptorProto" }, e))
  });
}

// node_modules/@bufbuild/protobuf/dist/esm/codegenv2/message.js
function messageDesc(file, path, ...paths) {
  return paths.reduce((acc, cur) => acc.nestedMessages[cur], file.messages[path]);
}

// node_modules/@bufbuild/protobuf/dist/esm/wkt/google/protobuf/descriptor_pb.js
var file_google_protobuf_descriptor = /* @__PURE__ */ boot({ "name": "google/protobuf/descriptor.proto", "package": "google.protobuf", "messageType": [{ "name": "FileDescriptorSet", "field": [{ "name": "file", "number": 1, "type": 11, "label": 3, "typeName": ".google.protobuf.FileDescriptorProto" }], "extensionRange": [{ "start": 536e6, "end": 536000001 }] }, { "name": "FileDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "package", "number": 2, "type": 9, "label": 1 }, { "name": "dependency", "number": 3, "type": 9, "label": 3 }, { "name": "public_dependency", "number": 10, "type": 5, "label": 3 }, { "name": "weak_dependency", "number": 11, "type": 5, "label": 3 }, { "name": "option_dependency", "number": 15, "type": 9, "label": 3 }, { "name": "message_type", "number": 4, "type": 11, "label": 3, "typeName": ".google.protobuf.DescriptorProto" }, { "name": "enum_type", "number": 5, "type": 11, "label": 3, "typeName": ".google.protobuf.EnumDescriptorProto" }, { "name": "service", "number": 6, "type": 11, "label": 3, "typeName": ".google.protobuf.ServiceDescriptorProto" }, { "name": "extension", "number": 7, "type": 11, "label": 3, "typeName": ".google.protobuf.FieldDescriptorProto" }, { "name": "options", "number": 8, "type": 11, "label": 1, "typeName": ".google.protobuf.FileOptions" }, { "name": "source_code_info", "number": 9, "type": 11, "label": 1, "typeName": ".google.protobuf.SourceCodeInfo" }, { "name": "syntax", "number": 12, "type": 9, "label": 1 }, { "name": "edition", "number": 14, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }] }, { "name": "DescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "field", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.FieldDescriptorProto" }, { "name": "extension", "number": 6, "type": 11, "label": 3, "typeName": ".google.protobuf.FieldDescriptorProto" }, { "name": "nested_type", "number": 3, "type": 11, "label": 3, "typeName": ".google.protobuf.DescriptorProto" }, { "name": "enum_type", "number": 4, "type": 11, "label": 3, "typeName": ".google.protobuf.EnumDescriptorProto" }, { "name": "extension_range", "number": 5, "type": 11, "label": 3, "typeName": ".google.protobuf.DescriptorProto.ExtensionRange" }, { "name": "oneof_decl", "number": 8, "type": 11, "label": 3, "typeName": ".google.protobuf.OneofDescriptorProto" }, { "name": "options", "number": 7, "type": 11, "label": 1, "typeName": ".google.protobuf.MessageOptions" }, { "name": "reserved_range", "number": 9, "type": 11, "label": 3, "typeName": ".google.protobuf.DescriptorProto.ReservedRange" }, { "name": "reserved_name", "number": 10, "type": 9, "label": 3 }, { "name": "visibility", "number": 11, "type": 14, "label": 1, "typeName": ".google.protobuf.SymbolVisibility" }], "nestedType": [{ "name": "ExtensionRange", "field": [{ "name": "start", "number": 1, "type": 5, "label": 1 }, { "name": "end", "number": 2, "type": 5, "label": 1 }, { "name": "options", "number": 3, "type": 11, "label": 1, "typeName": ".google.protobuf.ExtensionRangeOptions" }] }, { "name": "ReservedRange", "field": [{ "name": "start", "number": 1, "type": 5, "label": 1 }, { "name": "end", "number": 2, "type": 5, "label": 1 }] }] }, { "name": "ExtensionRangeOptions", "field": [{ "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }, { "name": "declaration", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.ExtensionRangeOptions.Declaration", "options": { "retention": 2 } }, { "name": "features", "number": 50, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "verification", "number": 3, "type": 14, "label": 1, "typeName": ".google.protobuf.ExtensionRangeOptions.VerificationState", "defaultValue": "UNVERIFIED", "options": { "retention": 2 } }], "nestedType": [{ "name": "Declaration", "field": [{ "name": "number", "number": 1, "type": 5, "label": 1 }, { "name": "full_name", "number": 2, "type": 9, "label": 1 }, { "name": "type", "number": 3, "type": 9, "label": 1 }, { "name": "reserved", "number": 5, "type": 8, "label": 1 }, { "name": "repeated", "number": 6, "type": 8, "label": 1 }] }], "enumType": [{ "name": "VerificationState", "value": [{ "name": "DECLARATION", "number": 0 }, { "name": "UNVERIFIED", "number": 1 }] }], "extensionRange": [{ "start": 990, "end": 999 }, { "start": 1e3, "end": 536870912 }] }, { "name": "FieldDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "number", "number": 3, "type": 5, "label": 1 }, { "name": "label", "number": 4, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldDescriptorProto.Label" }, { "name": "type", "number": 5, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldDescriptorProto.Type" }, { "name": "type_name", "number": 6, "type": 9, "label": 1 }, { "name": "extendee", "number": 2, "type": 9, "label": 1 }, { "name": "default_value", "number": 7, "type": 9, "label": 1 }, { "name": "oneof_index", "number": 9, "type": 5, "label": 1 }, { "name": "json_name", "number": 10, "type": 9, "label": 1 }, { "name": "options", "number": 8, "type": 11, "label": 1, "typeName": ".google.protobuf.FieldOptions" }, { "name": "proto3_optional", "number": 17, "type": 8, "label": 1 }], "enumType": [{ "name": "Type", "value": [{ "name": "TYPE_DOUBLE", "number": 1 }, { "name": "TYPE_FLOAT", "number": 2 }, { "name": "TYPE_INT64", "number": 3 }, { "name": "TYPE_UINT64", "number": 4 }, { "name": "TYPE_INT32", "number": 5 }, { "name": "TYPE_FIXED64", "number": 6 }, { "name": "TYPE_FIXED32", "number": 7 }, { "name": "TYPE_BOOL", "number": 8 }, { "name": "TYPE_STRING", "number": 9 }, { "name": "TYPE_GROUP", "number": 10 }, { "name": "TYPE_MESSAGE", "number": 11 }, { "name": "TYPE_BYTES", "number": 12 }, { "name": "TYPE_UINT32", "number": 13 }, { "name": "TYPE_ENUM", "number": 14 }, { "name": "TYPE_SFIXED32", "number": 15 }, { "name": "TYPE_SFIXED64", "number": 16 }, { "name": "TYPE_SINT32", "number": 17 }, { "name": "TYPE_SINT64", "number": 18 }] }, { "name": "Label", "value": [{ "name": "LABEL_OPTIONAL", "number": 1 }, { "name": "LABEL_REPEATED", "number": 3 }, { "name": "LABEL_REQUIRED", "number": 2 }] }] }, { "name": "OneofDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "options", "number": 2, "type": 11, "label": 1, "typeName": ".google.protobuf.OneofOptions" }] }, { "name": "EnumDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "value", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.EnumValueDescriptorProto" }, { "name": "options", "number": 3, "type": 11, "label": 1, "typeName": ".google.protobuf.EnumOptions" }, { "name": "reserved_range", "number": 4, "type": 11, "label": 3, "typeName": ".google.protobuf.EnumDescriptorProto.EnumReservedRange" }, { "name": "reserved_name", "number": 5, "type": 9, "label": 3 }, { "name": "visibility", "number": 6, "type": 14, "label": 1, "typeName": ".google.protobuf.SymbolVisibility" }], "nestedType": [{ "name": "EnumReservedRange", "field": [{ "name": "start", "number": 1, "type": 5, "label": 1 }, { "name": "end", "number": 2, "type": 5, "label": 1 }] }] }, { "name": "EnumValueDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "number", "number": 2, "type": 5, "label": 1 }, { "name": "options", "number": 3, "type": 11, "label": 1, "typeName": ".google.protobuf.EnumValueOptions" }] }, { "name": "ServiceDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "method", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.MethodDescriptorProto" }, { "name": "options", "number": 3, "type": 11, "label": 1, "typeName": ".google.protobuf.ServiceOptions" }] }, { "name": "MethodDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "input_type", "number": 2, "type": 9, "label": 1 }, { "name": "output_type", "number": 3, "type": 9, "label": 1 }, { "name": "options", "number": 4, "type": 11, "label": 1, "typeName": ".google.protobuf.MethodOptions" }, { "name": "client_streaming", "number": 5, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "server_streaming", "number": 6, "type": 8, "label": 1, "defaultValue": "false" }] }, { "name": "FileOptions", "field": [{ "name": "java_package", "number": 1, "type": 9, "label": 1 }, { "name": "java_outer_classname", "number": 8, "type": 9, "label": 1 }, { "name": "java_multiple_files", "number": 10, "type": 8, "label": 1, "defaultValue": "false", "options": {} }, { "name": "java_generate_equals_and_hash", "number": 20, "type": 8, "label": 1, "options": { "deprecated": true } }, { "name": "java_string_check_utf8", "number": 27, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "optimize_for", "number": 9, "type": 14, "label": 1, "typeName": ".google.protobuf.FileOptions.OptimizeMode", "defaultValue": "SPEED" }, { "name": "go_package", "number": 11, "type": 9, "label": 1 }, { "name": "cc_generic_services", "number": 16, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "java_generic_services", "number": 17, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "py_generic_services", "number": 18, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "deprecated", "number": 23, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "cc_enable_arenas", "number": 31, "type": 8, "label": 1, "defaultValue": "true", "options": {} }, { "name": "objc_class_prefix", "number": 36, "type": 9, "label": 1 }, { "name": "csharp_namespace", "number": 37, "type": 9, "label": 1 }, { "name": "swift_prefix", "number": 39, "type": 9, "label": 1 }, { "name": "php_class_prefix", "number": 40, "type": 9, "label": 1 }, { "name": "php_namespace", "number": 41, "type": 9, "label": 1 }, { "name": "php_metadata_namespace", "number": 44, "type": 9, "label": 1 }, { "name": "ruby_package", "number": 45, "type": 9, "label": 1 }, { "name": "features", "number": 50, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "enumType": [{ "name": "OptimizeMode", "value": [{ "name": "SPEED", "number": 1 }, { "name": "CODE_SIZE", "number": 2 }, { "name": "LITE_RUNTIME", "number": 3 }] }], "extensionRange": [{ "start": 990, "end": 999 }, { "start": 1e3, "end": 536870912 }] }, { "name": "MessageOptions", "field": [{ "name": "message_set_wire_format", "number": 1, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "no_standard_descriptor_accessor", "number": 2, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "deprecated", "number": 3, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "map_entry", "number": 7, "type": 8, "label": 1 }, { "name": "deprecated_legacy_json_field_conflicts", "number": 11, "type": 8, "label": 1, "options": { "deprecated": true } }, { "name": "features", "number": 12, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 990, "end": 999 }, { "start": 1e3, "end": 536870912 }] }, { "name": "FieldOptions", "field": [{ "name": "ctype", "number": 1, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldOptions.CType", "defaultValue": "STRING" }, { "name": "packed", "number": 2, "type": 8, "label": 1 }, { "name": "jstype", "number": 6, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldOptions.JSType", "defaultValue": "JS_NORMAL" }, { "name": "lazy", "number": 5, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "unverified_lazy", "number": 15, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "deprecated", "number": 3, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "weak", "number": 10, "type": 8, "label": 1, "defaultValue": "false", "options": { "deprecated": true } }, { "name": "debug_redact", "number": 16, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "retention", "number": 17, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldOptions.OptionRetention" }, { "name": "targets", "number": 19, "type": 14, "label": 3, "typeName": ".google.protobuf.FieldOptions.OptionTargetType" }, { "name": "edition_defaults", "number": 20, "type": 11, "label": 3, "typeName": ".google.protobuf.FieldOptions.EditionDefault" }, { "name": "features", "number": 21, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "feature_support", "number": 22, "type": 11, "label": 1, "typeName": ".google.protobuf.FieldOptions.FeatureSupport" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "nestedType": [{ "name": "EditionDefault", "field": [{ "name": "edition", "number": 3, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "value", "number": 2, "type": 9, "label": 1 }] }, { "name": "FeatureSupport", "field": [{ "name": "edition_introduced", "number": 1, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "edition_deprecated", "number": 2, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "deprecation_warning", "number": 3, "type": 9, "label": 1 }, { "name": "edition_removed", "number": 4, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "removal_error", "number": 5, "type": 9, "label": 1 }] }], "enumType": [{ "name": "CType", "value": [{ "name": "STRING", "number": 0 }, { "name": "CORD", "number": 1 }, { "name": "STRING_PIECE", "number": 2 }] }, { "name": "JSType", "value": [{ "name": "JS_NORMAL", "number": 0 }, { "name": "JS_STRING", "number": 1 }, { "name": "JS_NUMBER", "number": 2 }] }, { "name": "OptionRetention", "value": [{ "name": "RETENTION_UNKNOWN", "number": 0 }, { "name": "RETENTION_RUNTIME", "number": 1 }, { "name": "RETENTION_SOURCE", "number": 2 }] }, { "name": "OptionTargetType", "value": [{ "name": "TARGET_TYPE_UNKNOWN", "number": 0 }, { "name": "TARGET_TYPE_FILE", "number": 1 }, { "name": "TARGET_TYPE_EXTENSION_RANGE", "number": 2 }, { "name": "TARGET_TYPE_MESSAGE", "number": 3 }, { "name": "TARGET_TYPE_FIELD", "number": 4 }, { "name": "TARGET_TYPE_ONEOF", "number": 5 }, { "name": "TARGET_TYPE_ENUM", "number": 6 }, { "name": "TARGET_TYPE_ENUM_ENTRY", "number": 7 }, { "name": "TARGET_TYPE_SERVICE", "number": 8 }, { "name": "TARGET_TYPE_METHOD", "number": 9 }] }], "extensionRange": [{ "start": 990, "end": 999 }, { "start": 1e3, "end": 536870912 }] }, { "name": "OneofOptions", "field": [{ "name": "features", "number": 1, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 990, "end": 999 }, { "start": 1e3, "end": 536870912 }] }, { "name": "EnumOptions", "field": [{ "name": "allow_alias", "number": 2, "type": 8, "label": 1 }, { "name": "deprecated", "number": 3, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "deprecated_legacy_json_field_conflicts", "number": 6, "type": 8, "label": 1, "options": { "deprecated": true } }, { "name": "features", "number": 7, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 990, "end": 999 }, { "start": 1e3, "end": 536870912 }] }, { "name": "EnumValueOptions", "field": [{ "name": "deprecated", "number": 1, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "features", "number": 2, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "debug_redact", "number": 3, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "feature_support", "number": 4, "type": 11, "label": 1, "typeName": ".google.protobuf.FieldOptions.FeatureSupport" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 990, "end": 999 }, { "start": 1e3, "end": 536870912 }] }, { "name": "ServiceOptions", "field": [{ "name": "features", "number": 34, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "deprecated", "number": 33, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 990, "end": 999 }, { "start": 1e3, "end": 536870912 }] }, { "name": "MethodOptions", "field": [{ "name": "deprecated", "number": 33, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "idempotency_level", "number": 34, "type": 14, "label": 1, "typeName": ".google.protobuf.MethodOptions.IdempotencyLevel", "defaultValue": "IDEMPOTENCY_UNKNOWN" }, { "name": "features", "number": 35, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "enumType": [{ "name": "IdempotencyLevel", "value": [{ "name": "IDEMPOTENCY_UNKNOWN", "number": 0 }, { "name": "NO_SIDE_EFFECTS", "number": 1 }, { "name": "IDEMPOTENT", "number": 2 }] }], "extensionRange": [{ "start": 990, "end": 999 }, { "start": 1e3, "end": 536870912 }] }, { "name": "UninterpretedOption", "field": [{ "name": "name", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption.NamePart" }, { "name": "identifier_value", "number": 3, "type": 9, "label": 1 }, { "name": "positive_int_value", "number": 4, "type": 4, "label": 1 }, { "name": "negative_int_value", "number": 5, "type": 3, "label": 1 }, { "name": "double_value", "number": 6, "type": 1, "label": 1 }, { "name": "string_value", "number": 7, "type": 12, "label": 1 }, { "name": "aggregate_value", "number": 8, "type": 9, "label": 1 }], "nestedType": [{ "name": "NamePart", "field": [{ "name": "name_part", "number": 1, "type": 9, "label": 2 }, { "name": "is_extension", "number": 2, "type": 8, "label": 2 }] }] }, { "name": "FeatureSet", "field": [{ "name": "field_presence", "number": 1, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.FieldPresence", "options": { "retention": 1, "targets": [4, 1], "editionDefaults": [{ "value": "EXPLICIT", "edition": 900 }, { "value": "IMPLICIT", "edition": 999 }, { "value": "EXPLICIT", "edition": 1e3 }] } }, { "name": "enum_type", "number": 2, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.EnumType", "options": { "retention": 1, "targets": [6, 1], "editionDefaults": [{ "value": "CLOSED", "edition": 900 }, { "value": "OPEN", "edition": 999 }] } }, { "name": "repeated_field_encoding", "number": 3, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.RepeatedFieldEncoding", "options": { "retention": 1, "targets": [4, 1], "editionDefaults": [{ "value": "EXPANDED", "edition": 900 }, { "value": "PACKED", "edition": 999 }] } }, { "name": "utf8_validation", "number": 4, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.Utf8Validation", "options": { "retention": 1, "targets": [4, 1], "editionDefaults": [{ "value": "NONE", "edition": 900 }, { "value": "VERIFY", "edition": 999 }] } }, { "name": "message_encoding", "number": 5, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.MessageEncoding", "options": { "retention": 1, "targets": [4, 1], "editionDefaults": [{ "value": "LENGTH_PREFIXED", "edition": 900 }] } }, { "name": "json_format", "number": 6, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.JsonFormat", "options": { "retention": 1, "targets": [3, 6, 1], "editionDefaults": [{ "value": "LEGACY_BEST_EFFORT", "edition": 900 }, { "value": "ALLOW", "edition": 999 }] } }, { "name": "enforce_naming_style", "number": 7, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.EnforceNamingStyle", "options": { "retention": 2, "targets": [1, 2, 3, 4, 5, 6, 7, 8, 9], "editionDefaults": [{ "value": "STYLE_LEGACY", "edition": 900 }, { "value": "STYLE2024", "edition": 1001 }, { "value": "STYLE2026", "edition": 1002 }] } }, { "name": "default_symbol_visibility", "number": 8, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.VisibilityFeature.DefaultSymbolVisibility", "options": { "retention": 2, "targets": [1], "editionDefaults": [{ "value": "EXPORT_ALL", "edition": 900 }, { "value": "EXPORT_TOP_LEVEL", "edition": 1001 }, { "value": "STRICT", "edition": 1002 }] } }, { "name": "enforce_proto_limits", "number": 9, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.ProtoLimitsFeature.EnforceProtoLimits", "options": { "retention": 2, "targets": [6, 3, 4, 5], "editionDefaults": [{ "value": "LEGACY_NO_EXPLICIT_LIMITS", "edition": 900 }, { "value": "PROTO_LIMITS2026", "edition": 1002 }] } }], "nestedType": [{ "name": "VisibilityFeature", "enumType": [{ "name": "DefaultSymbolVisibility", "value": [{ "name": "DEFAULT_SYMBOL_VISIBILITY_UNKNOWN", "number": 0 }, { "name": "EXPORT_ALL", "number": 1 }, { "name": "EXPORT_TOP_LEVEL", "number": 2 }, { "name": "LOCAL_ALL", "number": 3 }, { "name": "STRICT", "number": 4 }] }] }, { "name": "ProtoLimitsFeature", "enumType": [{ "name": "EnforceProtoLimits", "value": [{ "name": "PROTO_LIMITS_UNKNOWN", "number": 0 }, { "name": "LEGACY_NO_EXPLICIT_LIMITS", "number": 1 }, { "name": "PROTO_LIMITS2026", "number": 2 }] }] }], "enumType": [{ "name": "FieldPresence", "value": [{ "name": "FIELD_PRESENCE_UNKNOWN", "number": 0 }, { "name": "EXPLICIT", "number": 1 }, { "name": "IMPLICIT", "number": 2 }, { "name": "LEGACY_REQUIRED", "number": 3 }] }, { "name": "EnumType", "value": [{ "name": "ENUM_TYPE_UNKNOWN", "number": 0 }, { "name": "OPEN", "number": 1 }, { "name": "CLOSED", "number": 2 }] }, { "name": "RepeatedFieldEncoding", "value": [{ "name": "REPEATED_FIELD_ENCODING_UNKNOWN", "number": 0 }, { "name": "PACKED", "number": 1 }, { "name": "EXPANDED", "number": 2 }] }, { "name": "Utf8Validation", "value": [{ "name": "UTF8_VALIDATION_UNKNOWN", "number": 0 }, { "name": "VERIFY", "number": 2 }, { "name": "NONE", "number": 3 }] }, { "name": "MessageEncoding", "value": [{ "name": "MESSAGE_ENCODING_UNKNOWN", "number": 0 }, { "name": "LENGTH_PREFIXED", "number": 1 }, { "name": "DELIMITED", "number": 2 }] }, { "name": "JsonFormat", "value": [{ "name": "JSON_FORMAT_UNKNOWN", "number": 0 }, { "name": "ALLOW", "number": 1 }, { "name": "LEGACY_BEST_EFFORT", "number": 2 }] }, { "name": "EnforceNamingStyle", "value": [{ "name": "ENFORCE_NAMING_STYLE_UNKNOWN", "number": 0 }, { "name": "STYLE2024", "number": 1 }, { "name": "STYLE_LEGACY", "number": 2 }, { "name": "STYLE2026", "number": 3 }] }], "extensionRange": [{ "start": 1e3, "end": 9995 }, { "start": 9995, "end": 1e4 }, { "start": 1e4, "end": 10001 }] }, { "name": "FeatureSetDefaults", "field": [{ "name": "defaults", "number": 1, "type": 11, "label": 3, "typeName": ".google.protobuf.FeatureSetDefaults.FeatureSetEditionDefault" }, { "name": "minimum_edition", "number": 4, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "maximum_edition", "number": 5, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }], "nestedType": [{ "name": "FeatureSetEditionDefault", "field": [{ "name": "edition", "number": 3, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "overridable_features", "number": 4, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "fixed_features", "number": 5, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }] }] }, { "name": "SourceCodeInfo", "field": [{ "name": "location", "number": 1, "type": 11, "label": 3, "typeName": ".google.protobuf.SourceCodeInfo.Location" }], "nestedType": [{ "name": "Location", "field": [{ "name": "path", "number": 1, "type": 5, "label": 3, "options": { "packed": true } }, { "name": "span", "number": 2, "type": 5, "label": 3, "options": { "packed": true } }, { "name": "leading_comments", "number": 3, "type": 9, "label": 1 }, { "name": "trailing_comments", "number": 4, "type": 9, "label": 1 }, { "name": "leading_detached_comments", "number": 6, "type": 9, "label": 3 }] }], "extensionRange": [{ "start": 536e6, "end": 536000001 }] }, { "name": "GeneratedCodeInfo", "field": [{ "name": "annotation", "number": 1, "type": 11, "label": 3, "typeName": ".google.protobuf.GeneratedCodeInfo.Annotation" }], "nestedType": [{ "name": "Annotation", "field": [{ "name": "path", "number": 1, "type": 5, "label": 3, "options": { "packed": true } }, { "name": "source_file", "number": 2, "type": 9, "label": 1 }, { "name": "begin", "number": 3, "type": 5, "label": 1 }, { "name": "end", "number": 4, "type": 5, "label": 1 }, { "name": "semantic", "number": 5, "type": 14, "label": 1, "typeName": ".google.protobuf.GeneratedCodeInfo.Annotation.Semantic" }], "enumType": [{ "name": "Semantic", "value": [{ "name": "NONE", "number": 0 }, { "name": "SET", "number": 1 }, { "name": "ALIAS", "number": 2 }] }] }] }], "enumType": [{ "name": "Edition", "value": [{ "name": "EDITION_UNKNOWN", "number": 0 }, { "name": "EDITION_LEGACY", "number": 900 }, { "name": "EDITION_PROTO2", "number": 998 }, { "name": "EDITION_PROTO3", "number": 999 }, { "name": "EDITION_2023", "number": 1e3 }, { "name": "EDITION_2024", "number": 1001 }, { "name": "EDITION_2026", "number": 1002 }, { "name": "EDITION_UNSTABLE", "number": 9999 }, { "name": "EDITION_1_TEST_ONLY", "number": 1 }, { "name": "EDITION_2_TEST_ONLY", "number": 2 }, { "name": "EDITION_99997_TEST_ONLY", "number": 99997 }, { "name": "EDITION_99998_TEST_ONLY", "number": 99998 }, { "name": "EDITION_99999_TEST_ONLY", "number": 99999 }, { "name": "EDITION_MAX", "number": 2147483647 }] }, { "name": "SymbolVisibility", "value": [{ "name": "VISIBILITY_UNSET", "number": 0 }, { "name": "VISIBILITY_LOCAL", "number": 1 }, { "name": "VISIBILITY_EXPORT", "number": 2 }] }] });
var FileDescriptorProtoSchema = /* @__PURE__ */ messageDesc(file_google_protobuf_descriptor, 1);
var ExtensionRangeOptions_VerificationState;
(function(ExtensionRangeOptions_VerificationState2) {
  ExtensionRangeOptions_VerificationState2[ExtensionRangeOptions_VerificationState2["DECLARATION"] = 0] = "DECLARATION";
  ExtensionRangeOptions_VerificationState2[ExtensionRangeOptions_VerificationState2["UNVERIFIED"] = 1] = "UNVERIFIED";
})(ExtensionRangeOptions_VerificationState || (ExtensionRangeOptions_VerificationState = {}));
var FieldDescriptorProto_Type;
(function(FieldDescriptorProto_Type2) {
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["DOUBLE"] = 1] = "DOUBLE";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["FLOAT"] = 2] = "FLOAT";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["INT64"] = 3] = "INT64";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["UINT64"] = 4] = "UINT64";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["INT32"] = 5] = "INT32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["FIXED64"] = 6] = "FIXED64";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["FIXED32"] = 7] = "FIXED32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["BOOL"] = 8] = "BOOL";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["STRING"] = 9] = "STRING";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["GROUP"] = 10] = "GROUP";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["MESSAGE"] = 11] = "MESSAGE";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["BYTES"] = 12] = "BYTES";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["UINT32"] = 13] = "UINT32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["ENUM"] = 14] = "ENUM";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["SFIXED32"] = 15] = "SFIXED32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["SFIXED64"] = 16] = "SFIXED64";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["SINT32"] = 17] = "SINT32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["SINT64"] = 18] = "SINT64";
})(FieldDescriptorProto_Type || (FieldDescriptorProto_Type = {}));
var FieldDescriptorProto_Label;
(function(FieldDescriptorProto_Label2) {
  FieldDescriptorProto_Label2[FieldDescriptorProto_Label2["OPTIONAL"] = 1] = "OPTIONAL";
  FieldDescriptorProto_Label2[FieldDescriptorProto_Label2["REPEATED"] = 3] = "REPEATED";
  FieldDescriptorProto_Label2[FieldDescriptorProto_Label2["REQUIRED"] = 2] = "REQUIRED";
})(FieldDescriptorProto_Label || (FieldDescriptorProto_Label = {}));
var FileOptions_OptimizeMode;
(function(FileOptions_OptimizeMode2) {
  FileOptions_OptimizeMode2[FileOptions_OptimizeMode2["SPEED"] = 1] = "SPEED";
  FileOptions_OptimizeMode2[FileOptions_OptimizeMode2["CODE_SIZE"] = 2] = "CODE_SIZE";
  FileOptions_OptimizeMode2[FileOptions_OptimizeMode2["LITE_RUNTIME"] = 3] = "LITE_RUNTIME";
})(FileOptions_OptimizeMode || (FileOptions_OptimizeMode = {}));
var FieldOptions_CType;
(function(FieldOptions_CType2) {
  FieldOptions_CType2[FieldOptions_CType2["STRING"] = 0] = "STRING";
  FieldOptions_CType2[FieldOptions_CType2["CORD"] = 1] = "CORD";
  FieldOptions_CType2[FieldOptions_CType2["STRING_PIECE"] = 2] = "STRING_PIECE";
})(FieldOptions_CType || (FieldOptions_CType = {}));
var FieldOptions_JSType;
(function(FieldOptions_JSType2) {
  FieldOptions_JSType2[FieldOptions_JSType2["JS_NORMAL"] = 0] = "JS_NORMAL";
  FieldOptions_JSType2[FieldOptions_JSType2["JS_STRING"] = 1] = "JS_STRING";
  FieldOptions_JSType2[FieldOptions_JSType2["JS_NUMBER"] = 2] = "JS_NUMBER";
})(FieldOptions_JSType || (FieldOptions_JSType = {}));
var FieldOptions_OptionRetention;
(function(FieldOptions_OptionRetention2) {
  FieldOptions_OptionRetention2[FieldOptions_OptionRetention2["RETENTION_UNKNOWN"] = 0] = "RETENTION_UNKNOWN";
  FieldOptions_OptionRetention2[FieldOptions_OptionRetention2["RETENTION_RUNTIME"] = 1] = "RETENTION_RUNTIME";
  FieldOptions_OptionRetention2[FieldOptions_OptionRetention2["RETENTION_SOURCE"] = 2] = "RETENTION_SOURCE";
})(FieldOptions_OptionRetention || (FieldOptions_OptionRetention = {}));
var FieldOptions_OptionTargetType;
(function(FieldOptions_OptionTargetType2) {
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_UNKNOWN"] = 0] = "TARGET_TYPE_UNKNOWN";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_FILE"] = 1] = "TARGET_TYPE_FILE";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_EXTENSION_RANGE"] = 2] = "TARGET_TYPE_EXTENSION_RANGE";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_MESSAGE"] = 3] = "TARGET_TYPE_MESSAGE";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_FIELD"] = 4] = "TARGET_TYPE_FIELD";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_ONEOF"] = 5] = "TARGET_TYPE_ONEOF";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_ENUM"] = 6] = "TARGET_TYPE_ENUM";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_ENUM_ENTRY"] = 7] = "TARGET_TYPE_ENUM_ENTRY";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_SERVICE"] = 8] = "TARGET_TYPE_SERVICE";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_METHOD"] = 9] = "TARGET_TYPE_METHOD";
})(FieldOptions_OptionTargetType || (FieldOptions_OptionTargetType = {}));
var MethodOptions_IdempotencyLevel;
(function(MethodOptions_IdempotencyLevel2) {
  MethodOptions_IdempotencyLevel2[MethodOptions_IdempotencyLevel2["IDEMPOTENCY_UNKNOWN"] = 0] = "IDEMPOTENCY_UNKNOWN";
  MethodOptions_IdempotencyLevel2[MethodOptions_IdempotencyLevel2["NO_SIDE_EFFECTS"] = 1] = "NO_SIDE_EFFECTS";
  MethodOptions_IdempotencyLevel2[MethodOptions_IdempotencyLevel2["IDEMPOTENT"] = 2] = "IDEMPOTENT";
})(MethodOptions_IdempotencyLevel || (MethodOptions_IdempotencyLevel = {}));
var FeatureSet_VisibilityFeature_DefaultSymbolVisibility;
(function(FeatureSet_VisibilityFeature_DefaultSymbolVisibility2) {
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["DEFAULT_SYMBOL_VISIBILITY_UNKNOWN"] = 0] = "DEFAULT_SYMBOL_VISIBILITY_UNKNOWN";
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["EXPORT_ALL"] = 1] = "EXPORT_ALL";
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["EXPORT_TOP_LEVEL"] = 2] = "EXPORT_TOP_LEVEL";
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["LOCAL_ALL"] = 3] = "LOCAL_ALL";
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["STRICT"] = 4] = "STRICT";
})(FeatureSet_VisibilityFeature_DefaultSymbolVisibility || (FeatureSet_VisibilityFeature_DefaultSymbolVisibility = {}));
var FeatureSet_ProtoLimitsFeature_EnforceProtoLimits;
(function(FeatureSet_ProtoLimitsFeature_EnforceProtoLimits2) {
  FeatureSet_ProtoLimitsFeature_EnforceProtoLimits2[FeatureSet_ProtoLimitsFeature_EnforceProtoLimits2["PROTO_LIMITS_UNKNOWN"] = 0] = "PROTO_LIMITS_UNKNOWN";
  FeatureSet_ProtoLimitsFeature_EnforceProtoLimits2[FeatureSet_ProtoLimitsFeature_EnforceProtoLimits2["LEGACY_NO_EXPLICIT_LIMITS"] = 1] = "LEGACY_NO_EXPLICIT_LIMITS";
  FeatureSet_ProtoLimitsFeature_EnforceProtoLimits2[FeatureSet_ProtoLimitsFeature_EnforceProtoLimits2["PROTO_LIMITS2026"] = 2] = "PROTO_LIMITS2026";
})(FeatureSet_ProtoLimitsFeature_EnforceProtoLimits || (FeatureSet_ProtoLimitsFeature_EnforceProtoLimits = {}));
var FeatureSet_FieldPresence;
(function(FeatureSet_FieldPresence2) {
  FeatureSet_FieldPresence2[FeatureSet_FieldPresence2["FIELD_PRESENCE_UNKNOWN"] = 0] = "FIELD_PRESENCE_UNKNOWN";
  FeatureSet_FieldPresence2[FeatureSet_FieldPresence2["EXPLICIT"] = 1] = "EXPLICIT";
  FeatureSet_FieldPresence2[FeatureSet_FieldPresence2["IMPLICIT"] = 2] = "IMPLICIT";
  FeatureSet_FieldPresence2[FeatureSet_FieldPresence2["LEGACY_REQUIRED"] = 3] = "LEGACY_REQUIRED";
})(FeatureSet_FieldPresence || (FeatureSet_FieldPresence = {}));
var FeatureSet_EnumType;
(function(FeatureSet_EnumType2) {
  FeatureSet_EnumType2[FeatureSet_EnumType2["ENUM_TYPE_UNKNOWN"] = 0] = "ENUM_TYPE_UNKNOWN";
  FeatureSet_EnumType2[FeatureSet_EnumType2["OPEN"] = 1] = "OPEN";
  FeatureSet_EnumType2[FeatureSet_EnumType2["CLOSED"] = 2] = "CLOSED";
})(FeatureSet_EnumType || (FeatureSet_EnumType = {}));
var FeatureSet_RepeatedFieldEncoding;
(function(FeatureSet_RepeatedFieldEncoding2) {
  FeatureSet_RepeatedFieldEncoding2[FeatureSet_RepeatedFieldEncoding2["REPEATED_FIELD_ENCODING_UNKNOWN"] = 0] = "REPEATED_FIELD_ENCODING_UNKNOWN";
  FeatureSet_RepeatedFieldEncoding2[FeatureSet_RepeatedFieldEncoding2["PACKED"] = 1] = "PACKED";
  FeatureSet_RepeatedFieldEncoding2[FeatureSet_RepeatedFieldEncoding2["EXPANDED"] = 2] = "EXPANDED";
})(FeatureSet_RepeatedFieldEncoding || (FeatureSet_RepeatedFieldEncoding = {}));
var FeatureSet_Utf8Validation;
(function(FeatureSet_Utf8Validation2) {
  FeatureSet_Utf8Validation2[FeatureSet_Utf8Validation2["UTF8_VALIDATION_UNKNOWN"] = 0] = "UTF8_VALIDATION_UNKNOWN";
  FeatureSet_Utf8Validation2[FeatureSet_Utf8Validation2["VERIFY"] = 2] = "VERIFY";
  FeatureSet_Utf8Validation2[FeatureSet_Utf8Validation2["NONE"] = 3] = "NONE";
})(FeatureSet_Utf8Validation || (FeatureSet_Utf8Validation = {}));
var FeatureSet_MessageEncoding;
(function(FeatureSet_MessageEncoding2) {
  FeatureSet_MessageEncoding2[FeatureSet_MessageEncoding2["MESSAGE_ENCODING_UNKNOWN"] = 0] = "MESSAGE_ENCODING_UNKNOWN";
  FeatureSet_MessageEncoding2[FeatureSet_MessageEncoding2["LENGTH_PREFIXED"] = 1] = "LENGTH_PREFIXED";
  FeatureSet_MessageEncoding2[FeatureSet_MessageEncoding2["DELIMITED"] = 2] = "DELIMITED";
})(FeatureSet_MessageEncoding || (FeatureSet_MessageEncoding = {}));
var FeatureSet_JsonFormat;
(function(FeatureSet_JsonFormat2) {
  FeatureSet_JsonFormat2[FeatureSet_JsonFormat2["JSON_FORMAT_UNKNOWN"] = 0] = "JSON_FORMAT_UNKNOWN";
  FeatureSet_JsonFormat2[FeatureSet_JsonFormat2["ALLOW"] = 1] = "ALLOW";
  FeatureSet_JsonFormat2[FeatureSet_JsonFormat2["LEGACY_BEST_EFFORT"] = 2] = "LEGACY_BEST_EFFORT";
})(FeatureSet_JsonFormat || (FeatureSet_JsonFormat = {}));
var FeatureSet_EnforceNamingStyle;
(function(FeatureSet_EnforceNamingStyle2) {
  FeatureSet_EnforceNamingStyle2[FeatureSet_EnforceNamingStyle2["ENFORCE_NAMING_STYLE_UNKNOWN"] = 0] = "ENFORCE_NAMING_STYLE_UNKNOWN";
  FeatureSet_EnforceNamingStyle2[FeatureSet_EnforceNamingStyle2["STYLE2024"] = 1] = "STYLE2024";
  FeatureSet_EnforceNamingStyle2[FeatureSet_EnforceNamingStyle2["STYLE_LEGACY"] = 2] = "STYLE_LEGACY";
  FeatureSet_EnforceNamingStyle2[FeatureSet_EnforceNamingStyle2["STYLE2026"] = 3] = "STYLE2026";
})(FeatureSet_EnforceNamingStyle || (FeatureSet_EnforceNamingStyle = {}));
var GeneratedCodeInfo_Annotation_Semantic;
(function(GeneratedCodeInfo_Annotation_Semantic2) {
  GeneratedCodeInfo_Annotation_Semantic2[GeneratedCodeInfo_Annotation_Semantic2["NONE"] = 0] = "NONE";
  GeneratedCodeInfo_Annotation_Semantic2[GeneratedCodeInfo_Annotation_Semantic2["SET"] = 1] = "SET";
  GeneratedCodeInfo_Annotation_Semantic2[GeneratedCodeInfo_Annotation_Semantic2["ALIAS"] = 2] = "ALIAS";
})(GeneratedCodeInfo_Annotation_Semantic || (GeneratedCodeInfo_Annotation_Semantic = {}));
var Edition;
(function(Edition2) {
  Edition2[Edition2["EDITION_UNKNOWN"] = 0] = "EDITION_UNKNOWN";
  Edition2[Edition2["EDITION_LEGACY"] = 900] = "EDITION_LEGACY";
  Edition2[Edition2["EDITION_PROTO2"] = 998] = "EDITION_PROTO2";
  Edition2[Edition2["EDITION_PROTO3"] = 999] = "EDITION_PROTO3";
  Edition2[Edition2["EDITION_2023"] = 1e3] = "EDITION_2023";
  Edition2[Edition2["EDITION_2024"] = 1001] = "EDITION_2024";
  Edition2[Edition2["EDITION_2026"] = 1002] = "EDITION_2026";
  Edition2[Edition2["EDITION_UNSTABLE"] = 9999] = "EDITION_UNSTABLE";
  Edition2[Edition2["EDITION_1_TEST_ONLY"] = 1] = "EDITION_1_TEST_ONLY";
  Edition2[Edition2["EDITION_2_TEST_ONLY"] = 2] = "EDITION_2_TEST_ONLY";
  Edition2[Edition2["EDITION_99997_TEST_ONLY"] = 99997] = "EDITION_99997_TEST_ONLY";
  Edition2[Edition2["EDITION_99998_TEST_ONLY"] = 99998] = "EDITION_99998_TEST_ONLY";
  Edition2[Edition2["EDITION_99999_TEST_ONLY"] = 99999] = "EDITION_99999_TEST_ONLY";
  Edition2[Edition2["EDITION_MAX"] = 2147483647] = "EDITION_MAX";
})(Edition || (Edition = {}));
var SymbolVisibility;
(function(SymbolVisibility2) {
  SymbolVisibility2[SymbolVisibility2["VISIBILITY_UNSET"] = 0] = "VISIBILITY_UNSET";
  SymbolVisibility2[SymbolVisibility2["VISIBILITY_LOCAL"] = 1] = "VISIBILITY_LOCAL";
  SymbolVisibility2[SymbolVisibility2["VISIBILITY_EXPORT"] = 2] = "VISIBILITY_EXPORT";
})(SymbolVisibility || (SymbolVisibility = {}));

// node_modules/@bufbuild/protobuf/dist/esm/from-binary.js
function makeReadContext(options) {
  return Object.assign(Object.assign({ readUnknownFields: true, recursionLimit: 100 }, options), { depth: 0 });
}
function fromBinary(schema, bytes, options) {
  const message = create(schema);
  compiledReader(schema).read(message, new BinaryReader(bytes), makeReadContext(options), bytes.byteLength);
  return message;
}
var compiledReaders = /* @__PURE__ */ new WeakMap();
function compiledReader(desc) {
  let compiled = compiledReaders.get(desc);
  if (compiled === void 0) {
    compiled = compileMessage(desc);
  }
  return compiled;
}
function compileMessage(desc) {
  const descString = String(desc);
  const fieldReaders = /* @__PURE__ */ new Map();
  const compiled = {
    read: compileMessageReader(descString, fieldReaders),
    readGroup: compileGroupReader(descString, fieldReaders)
  };
  compiledReaders.set(desc, compiled);
  for (const field of desc.fields) {
    fieldReaders.set(field.number, compileFieldReader(field));
  }
  return compiled;
}
function compileMessageReader(descString, fieldReaders) {
  return (message, reader, ctx, length) => {
    var _a;
    if (++ctx.depth > ctx.recursionLimit) {
      throw new Error(`cannot decode ${descString} from binary: maximum recursion depth of ${ctx.recursionLimit} reached`);
    }
    const end = reader.pos + length;
    const unknownFields = (_a = message.$unknown) !== null && _a !== void 0 ? _a : [];
    while (reader.pos < end) {
      const [fieldNo, wireType] = reader.tag();
      const fieldReader = fieldReaders.get(fieldNo);
      if (fieldReader === void 0) {
        const data = reader.skip(wireType, fieldNo, ctx.recursionLimit - ctx.depth);
        if (ctx.readUnknownFields) {
          unknownFields.push({ no: fieldNo, wireType, data });
        }
        continue;
      }
      fieldReader(message, reader, ctx, wireType);
    }
    if (unknownFields.length > 0) {
      message.$unknown = unknownFields;
    }
    ctx.depth--;
  };
}
function compileGroupReader(descString, fieldReaders) {
  return (message, reader, ctx, fieldNo) => {
    var _a;
    if (++ctx.depth > ctx.recursionLimit) {
      throw new Error(`cannot decode ${descString} from binary: maximum recursion depth of ${ctx.recursionLimit} reached`);
    }
    let recordFieldNo;
    let wireType;
    const unknownFields = (_a = message.$unknown) !== null && _a !== void 0 ? _a : [];
    while (reader.pos < reader.len) {
      [recordFieldNo, wireType] = reader.tag();
      if (wireType == WireType.EndGroup) {
        break;
      }
      const fieldReader = fieldReaders.get(recordFieldNo);
      if (fieldReader === void 0) {
        const data = reader.skip(wireType, recordFieldNo, ctx.recursionLimit - ctx.depth);
        if (ctx.readUnknownFields) {
          unknownFields.push({ no: recordFieldNo, wireType, data });
        }
        continue;
      }
      fieldReader(message, reader, ctx, wireType);
    }
    if (wireType != WireType.EndGroup || recordFieldNo !== fieldNo) {
      throw new Error("invalid end group tag");
    }
    if (unknownFields.length > 0) {
      message.$unknown = unknownFields;
    }
    ctx.depth--;
  };
}
function compileFieldReader(field) {
  switch (field.fieldKind) {
    case "scalar":
      return compileScalarFieldReader(field);
    case "enum":
      return compileEnumFieldReader(field);
    case "message":
      return compileMessageFieldReader(field);
    case "list":
      return compileListFieldReader(field);
    case "map":
      return compileMapFieldReader(field);
  }
}
function compileScalarFieldReader(field) {
  const readScalar = compileScalarReader(field.scalar, field.utf8Validation, field.longAsString);
  const localName = field.localName;
  if (field.oneof) {
    const oneofLocalName = field.oneof.localName;
    return (message, reader) => {
      message[oneofLocalName] = {
        case: localName,
        value: readScalar(reader)
      };
    };
  }
  return (message, reader) => {
    message[localName] = readScalar(reader);
  };
}
function compileEnumFieldReader(field) {
  var _a;
  const localName = field.localName;
  const oneofLocalName = (_a = field.oneof) === null || _a === void 0 ? void 0 : _a.localName;
  if (field.enum.open) {
    if (oneofLocalName !== void 0) {
      return (message, reader) => {
        message[oneofLocalName] = { case: localName, value: reader.int32() };
      };
    }
    return (message, reader) => {
      message[localName] = reader.int32();
    };
  }
  const values = field.enum.values;
  const fieldNo = field.number;
  return (message, reader, ctx, wireType) => {
    var _a2;
    const val = reader.int32();
    if (values.some((v) => v.number === val)) {
      if (oneofLocalName !== void 0) {
        message[oneofLocalName] = { case: localName, value: val };
      } else {
        message[localName] = val;
      }
    } else if (ctx.readUnknownFields) {
      const bytes = [];
      varint32write(val, bytes);
      const unknownFields = (_a2 = message.$unknown) !== null && _a2 !== void 0 ? _a2 : [];
      unknownFields.push({
        no: fieldNo,
        wireType,
        data: new Uint8Array(bytes)
      });
      message.$unknown = unknownFields;
    }
  };
}
function compileMessageFieldReader(field) {
  const localName = field.localName;
  const { toMessage, toLocal } = localMessageMapper(field);
  const readChild = compileChildReader(field);
  if (field.oneof) {
    const oneofLocalName = field.oneof.localName;
    return (message, reader, ctx) => {
      const oneof = message[oneofLocalName];
      const child = toMessage(oneof.case === localName ? oneof.value : void 0);
      readChild(child, reader, ctx);
      message[oneofLocalName] = { case: localName, value: toLocal(child) };
    };
  }
  return (message, reader, ctx) => {
    const child = toMessage(message[localName]);
    readChild(child, reader, ctx);
    message[localName] = toLocal(child);
  };
}
function compileChildReader(field) {
  const compiledChild = compiledReader(field.message);
  if (field.delimitedEncoding) {
    const fieldNo = field.number;
    return (child, reader, ctx) => compiledChild.readGroup(child, reader, ctx, fieldNo);
  }
  return (child, reader, ctx) => compiledChild.read(child, reader, ctx, reader.uint32());
}
function compileListFieldReader(field) {
  const localName = field.localName;
  if (field.listKind == "message") {
    const { toMessage, toLocal } = localMessageMapper(field);
    const readChild = compileChildReader(field);
    return (message, reader, ctx) => {
      const child = toMessage(void 0);
      readChild(child, reader, ctx);
      message[localName].push(toLocal(child));
    };
  }
  const scalarType = field.listKind == "enum" ? ScalarType.INT32 : field.scalar;
  const longAsString = field.listKind == "scalar" ? field.longAsString : false;
  const readScalar = compileScalarReader(scalarType, field.utf8Validation, longAsString);
  const packedPossible = scalarType != ScalarType.STRING && scalarType != ScalarType.BYTES;
  return (message, reader, ctx, wireType) => {
    const items = message[localName];
    if (wireType == WireType.LengthDelimited && packedPossible) {
      const end = reader.uint32() + reader.pos;
      while (reader.pos < end) {
        items.push(readScalar(reader));
      }
    } else {
      items.push(readScalar(reader));
    }
  };
}
function compileMapFieldReader(field) {
  const localName = field.localName;
  const readKey = compileScalarReader(field.mapKey, field.utf8Validation, false);
  const keyZero = scalarZeroValue(field.mapKey, false);
  let readValue;
  let valueDefault;
  switch (field.mapKind) {
    case "scalar": {
      const scalar = field.scalar;
      const readScalar = compileScalarReader(scalar, field.utf8Validation, false);
      readValue = (reader) => readScalar(reader);
      if (scalar == ScalarType.BYTES) {
        valueDefault = () => new Uint8Array(0);
      } else {
        const zero = scalarZeroValue(scalar, false);
        valueDefault = () => zero;
      }
      break;
    }
    case "enum": {
      const zero = field.enum.values[0].number;
      readValue = (reader) => reader.int32();
      valueDefault = () => zero;
      break;
    }
    case "message": {
      const { toMessage, toLocal } = localMessageMapper(field);
      const readChild = compiledReader(field.message).read;
      readValue = (reader, ctx, existing) => {
        const child = toMessage(existing);
        readChild(child, reader, ctx, reader.uint32());
        return toLocal(child);
      };
      valueDefault = () => toLocal(toMessage(void 0));
      break;
    }
  }
  return (message, reader, ctx) => {
    const record = message[localName];
    let key;
    let val;
    const len = reader.uint32();
    const end = reader.pos + len;
    while (reader.pos < end) {
      const [fieldNo, wireType] = reader.tag();
      switch (fieldNo) {
        case 1:
          key = readKey(reader);
          break;
        case 2:
          val = readValue(reader, ctx, val);
          break;
        default:
          reader.skip(wireType, fieldNo, ctx.recursionLimit - ctx.depth);
      }
    }
    if (key === void 0) {
      key = keyZero;
    }
    if (val === void 0) {
      val = valueDefault();
    }
    setOwn(record, key, val);
  };
}
function compileScalarReader(type, utf8Validation, longAsString) {
  switch (type) {
    case ScalarType.STRING:
      return (reader) => reader.string(utf8Validation);
    case ScalarType.BOOL:
      return (reader) => reader.bool();
    case ScalarType.DOUBLE:
      return (reader) => reader.double();
    case ScalarType.FLOAT:
      return (reader) => reader.float();
    case ScalarType.INT32:
      return (reader) => reader.int32();
    case ScalarType.INT64:
      if (longAsString) {
        return (reader) => String(reader.int64());
      }
      return (reader) => reader.int64();
    case ScalarType.UINT64:
      if (longAsString) {
        return (reader) => String(reader.uint64());
      }
      return (reader) => reader.uint64();
    case ScalarType.FIXED64:
      if (longAsString) {
        return (reader) => String(reader.fixed64());
      }
      return (reader) => reader.fixed64();
    case ScalarType.BYTES:
      return (reader) => reader.bytes();
    case ScalarType.FIXED32:
      return (reader) => reader.fixed32();
    case ScalarType.SFIXED32:
      return (reader) => reader.sfixed32();
    case ScalarType.SFIXED64:
      if (longAsString) {
        return (reader) => String(reader.sfixed64());
      }
      return (reader) => reader.sfixed64();
    case ScalarType.SINT64:
      if (longAsString) {
        return (reader) => String(reader.sint64());
      }
      return (reader) => reader.sint64();
    case ScalarType.UINT32:
      return (reader) => reader.uint32();
    case ScalarType.SINT32:
      return (reader) => reader.sint32();
  }
}

// node_modules/@bufbuild/protobuf/dist/esm/codegenv2/file.js
function fileDesc(b64, imports) {
  var _a;
  const root = fromBinary(FileDescriptorProtoSchema, base64Decode(b64));
  root.messageType.forEach(restoreJsonNames);
  root.dependency = (_a = imports === null || imports === void 0 ? void 0 : imports.map((f) => f.proto.name)) !== null && _a !== void 0 ? _a : [];
  const reg = createEmbeddedFileRegistry(root, (protoFileName) => imports === null || imports === void 0 ? void 0 : imports.find((f) => f.proto.name === protoFileName));
  return reg.getFile(root.name);
}

// node_modules/@bufbuild/protobuf/dist/esm/to-binary.js
var IMPLICIT3 = 2;
var LEGACY_REQUIRED2 = 3;
var writeDefaults = {
  writeUnknownFields: true
};
function makeWriteOptions(options) {
  return options ? Object.assign(Object.assign({}, writeDefaults), options) : writeDefaults;
}
function toBinary(schema, message, options) {
  const writer = new BinaryWriter();
  compiledWriter(schema)(writer, makeWriteOptions(options), message);
  return writer.finish();
}
var compiledWriters = /* @__PURE__ */ new WeakMap();
function compiledWriter(desc) {
  let compiled = compiledWriters.get(desc);
  if (compiled === void 0) {
    compiled = compileMessage2(desc);
  }
  return compiled;
}
function compileMessage2(desc) {
  const typeName = desc.typeName;
  const sortedFields = desc.fields.concat().sort((a, b) => a.number - b.number);
  const foreignField = sortedFields[0];
  const fieldWriters = [];
  const compiled = (writer, opts, message) => {
    if (message.$typeName !== typeName && foreignField !== void 0) {
      throw new FieldError(foreignField, `cannot use ${foreignField} with message ${message.$typeName}`, "ForeignFieldError");
    }
    for (let i = 0; i < fieldWriters.length; i++) {
      fieldWriters[i](writer, opts, message);
    }
    const unknown = message.$unknown;
    if (unknown !== void 0 && opts.writeUnknownFields) {
      for (let i = 0; i < unknown.length; i++) {
        const { no, wireType, data } = unknown[i];
        writer.tag(no, wireType).raw(data);
      }
    }
  };
  compiledWriters.set(desc, compiled);
  for (const field of sortedFields) {
    fieldWriters.push(compileField(field));
  }
  return compiled;
}
function compileField(field) {
  switch (field.fieldKind) {
    case "message":
    case "scalar":
    case "enum":
      return compileSingularField(field);
    case "list":
      return compileListField(field);
    case "map":
      return compileMapField(field);
  }
}
function compileSingularField(field) {
  const writeValue = compileSingularValue(field);
  const localName = field.localName;
  if (field.oneof) {
    const oneofLocalName = field.oneof.localName;
    return (writer, opts, message) => {
      const oneof = message[oneofLocalName];
      if (oneof.case === localName) {
        writeValue(writer, opts, oneof.value);
      }
    };
  }
  if (field.presence != IMPLICIT3) {
    const requiredError = field.presence == LEGACY_REQUIRED2 ? `cannot encode ${field} to binary: required field not set` : void 0;
    return (writer, opts, message) => {
      const value = message[localName];
      if (value !== void 0 && Object.prototype.hasOwnProperty.call(message, localName)) {
        writeValue(writer, opts, value);
      } else if (requiredError !== void 0) {
        throw new Error(requiredError);
      }
    };
  }
  if (field.fieldKind == "enum") {
    const zero = field.enum.values[0].number;
    return (writer, opts, message) => {
      const value = message[localName];
      if (value !== zero) {
        writeValue(writer, opts, value);
      }
    };
  }
  switch (field.scalar) {
    case ScalarType.BOOL:
      return (writer, opts, message) => {
        const value = message[localName];
        if (value !== false) {
          writeValue(writer, opts, value);
        }
      };
    case ScalarType.STRING:
      return (writer, opts, message) => {
        const value = message[localName];
        if (value !== "") {
          writeValue(writer, opts, value);
        }
      };
    case ScalarType.BYTES:
      return (writer, opts, message) => {
        const value = message[localName];
        if (!(value instanceof Uint8Array) || value.byteLength > 0) {
          writeValue(writer, opts, value);
        }
      };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return (writer, opts, message) => {
        const value = message[localName];
        if (!Object.is(value, 0)) {
          writeValue(writer, opts, value);
        }
      };
    default:
      return (writer, opts, message) => {
        const value = message[localName];
        if (value != 0) {
          writeValue(writer, opts, value);
        }
      };
  }
}
function compileSingularValue(field) {
  switch (field.fieldKind) {
    case "message": {
      const { toMessage } = localMessageMapper(field);
      const writeChild = compileChildWriter(field);
      return (writer, opts, value) => {
        writeChild(writer, opts, toMessage(value));
      };
    }
    case "scalar":
    case "enum": {
      const scalarType = field.fieldKind == "enum" ? ScalarType.INT32 : field.scalar;
      const fieldNo = field.number;
      const wireType = writeTypeOfScalar(scalarType);
      const writeScalar = compileScalarValue(scalarType, field.parent.typeName, field.name);
      return (writer, opts, value) => {
        writer.tag(fieldNo, wireType);
        writeScalar(writer, value);
      };
    }
  }
}
function compileListField(field) {
  const localName = field.localName;
  const fieldNo = field.number;
  switch (field.listKind) {
    case "message": {
      const { toMessage } = localMessageMapper(field);
      const writeChild = compileChildWriter(field);
      return (writer, opts, message) => {
        const items = message[localName];
        for (let i = 0; i < items.length; i++) {
          writeChild(writer, opts, toMessage(items[i]));
        }
      };
    }
    case "scalar":
    case "enum": {
      const scalarType = field.listKind == "enum" ? ScalarType.INT32 : field.scalar;
      const writeScalar = compileScalarValue(scalarType, field.parent.typeName, field.name);
      if (field.packed) {
        return (writer, opts, message) => {
          const items = message[localName];
          if (items.length == 0) {
            return;
          }
          writer.tag(fieldNo, WireType.LengthDelimited).fork();
          for (let i = 0; i < items.length; i++) {
            writeScalar(writer, items[i]);
          }
          writer.join();
        };
      }
      const wireType = writeTypeOfScalar(scalarType);
      return (writer, opts, message) => {
        const items = message[localName];
        for (let i = 0; i < items.length; i++) {
          writer.tag(fieldNo, wireType);
          writeScalar(writer, items[i]);
        }
      };
    }
  }
}
function compileMapField(field) {
  const localName = field.localName;
  const fieldNo = field.number;
  const writeKey = compileMapKey(field);
  if (field.mapKind == "message") {
    const { toMessage } = localMessageMapper(field);
    const writeMessage = compiledWriter(field.message);
    return (writer, opts, message) => {
      const record = message[localName];
      const keys = Object.keys(record);
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        writer.tag(fieldNo, WireType.LengthDelimited).fork();
        writeKey(writer, key);
        writer.tag(2, WireType.LengthDelimited).fork();
        writeMessage(writer, opts, toMessage(record[key]));
        writer.join();
        writer.join();
      }
    };
  }
  const scalarType = field.mapKind == "enum" ? ScalarType.INT32 : field.scalar;
  const valueWireType = writeTypeOfScalar(scalarType);
  const writeScalar = compileScalarValue(scalarType, field.parent.typeName, field.name);
  return (writer, opts, message) => {
    const record = message[localName];
    const keys = Object.keys(record);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      writer.tag(fieldNo, WireType.LengthDelimited).fork();
      writeKey(writer, key);
      writer.tag(2, valueWireType);
      writeScalar(writer, record[key]);
      writer.join();
    }
  };
}
function compileMapKey(field) {
  const wireType = writeTypeOfScalar(field.mapKey);
  const writeScalar = compileScalarValue(field.mapKey, field.parent.typeName, field.name);
  const convertKey = compileMapKeyConverter(field.mapKey);
  return (writer, key) => {
    writer.tag(1, wireType);
    writeScalar(writer, convertKey(key));
  };
}
function compileMapKeyConverter(type) {
  switch (type) {
    case ScalarType.STRING:
      return (key) => key;
    case ScalarType.BOOL:
      return (key) => key === "true" ? true : key === "false" ? false : key;
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return (key) => {
        try {
          return protoInt64.uParse(key);
        } catch (_a) {
          return key;
        }
      };
    case ScalarType.INT64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      return (key) => {
        try {
          return protoInt64.parse(key);
        } catch (_a) {
          return key;
        }
      };
    default:
      return (key) => {
        const n = Number.parseInt(key);
        return Number.isFinite(n) ? n : key;
      };
  }
}
function compileScalarValue(type, messageName, fieldName) {
  const writeScalar = compileScalarWrite(type);
  return (writer, value) => {
    try {
      writeScalar(writer, value);
    } catch (e) {
      if (e instanceof Error) {
        throw new Error(`cannot encode field ${messageName}.${fieldName} to binary: ${e.message}`);
      }
      throw e;
    }
  };
}
function compileScalarWrite(type) {
  switch (type) {
    case ScalarType.STRING:
      return (writer, value) => writer.string(value);
    case ScalarType.BOOL:
      return (writer, value) => writer.bool(value);
    case ScalarType.DOUBLE:
      return (writer, value) => writer.double(value);
    case ScalarType.FLOAT:
      return (writer, value) => writer.float(value);
    case ScalarType.INT32:
      return (writer, value) => writer.int32(value);
    case ScalarType.INT64:
      return (writer, value) => writer.int64(value);
    case ScalarType.UINT64:
      return (writer, value) => writer.uint64(value);
    case ScalarType.FIXED64:
      return (writer, value) => writer.fixed64(value);
    case ScalarType.BYTES:
      return (writer, value) => writer.bytes(value);
    case ScalarType.FIXED32:
      return (writer, value) => writer.fixed32(value);
    case ScalarType.SFIXED32:
      return (writer, value) => writer.sfixed32(value);
    case ScalarType.SFIXED64:
      return (writer, value) => writer.sfixed64(value);
    case ScalarType.SINT64:
      return (writer, value) => writer.sint64(value);
    case ScalarType.UINT32:
      return (writer, value) => writer.uint32(value);
    case ScalarType.SINT32:
      return (writer, value) => writer.sint32(value);
  }
}
function compileChildWriter(field) {
  const fieldNo = field.number;
  const writeMessage = compiledWriter(field.message);
  if (field.delimitedEncoding) {
    return (writer, opts, child) => {
      writer.tag(fieldNo, WireType.StartGroup);
      writeMessage(writer, opts, child);
      writer.tag(fieldNo, WireType.EndGroup);
    };
  }
  return (writer, opts, child) => {
    writer.tag(fieldNo, WireType.LengthDelimited).fork();
    writeMessage(writer, opts, child);
    writer.join();
  };
}
function writeTypeOfScalar(type) {
  switch (type) {
    case ScalarType.BYTES:
    case ScalarType.STRING:
      return WireType.LengthDelimited;
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WireType.Bit64;
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
    case ScalarType.FLOAT:
      return WireType.Bit32;
    default:
      return WireType.Varint;
  }
}

// src/gen/inboxd_pb.ts
var file_inboxd = /* @__PURE__ */ fileDesc("CgxpbmJveGQucHJvdG8SCWluYm94ZC52MSI7CgVIZWxsbxINCgV0b2tlbhgBIAEoCRITCgtkZXZpY2Vfa2luZBgCIAEoCRIOCgZjbGllbnQYAyABKAkiSgoEU2VuZBIVCg1jbGllbnRfbXNnX2lkGAEgASgJEg8KB2NvbnZfaWQYAiABKAMSDAoEa2luZBgDIAEoDRIMCgR0ZXh0GAQgASgJIiYKA0FjaxIRCgliYXRjaF9pZHMYASADKAQSDAoEc2VxcxgCIAMoBCIVCgRQaW5nEg0KBW5vbmNlGAEgASgEIjsKDlN1bW1hcnlSZXF1ZXN0EhIKCnJlcXVlc3RfaWQYASABKAQSFQoNYmVmb3JlX21zZ19pZBgCIAEoAyJrCgRQdWxsEhIKCnJlcXVlc3RfaWQYASABKAQSDwoHY29udl9pZBgCIAEoAxIWCg5hZnRlcl9jb252X3NlcRgDIAEoAxIXCg9iZWZvcmVfY29udl9zZXEYBCABKAMSDQoFbGltaXQYBSABKA0iQwoEUmVhZBISCgpyZXF1ZXN0X2lkGAEgASgEEg8KB2NvbnZfaWQYAiABKAMSFgoOdXBfdG9fY29udl9zZXEYAyABKAMiHQoIQWNrUmFuZ2USEQoJdXBfdG9fc2VxGAEgASgEIiwKB1JlZnJlc2gSEgoKcmVxdWVzdF9pZBgBIAEoBBINCgV0b2tlbhgCIAEoCSJCCglSZWFkQ291bnQSEgoKcmVxdWVzdF9pZBgBIAEoBBIPCgdjb252X2lkGAIgASgDEhAKCGNvbnZfc2VxGAMgASgDIq8CCgdXZWxjb21lEgsKA3VpZBgBIAEoAxIOCgZkZXZpY2UYAiABKAkSDgoGY3Vyc29yGAMgASgEEg0KBWVwb2NoGAQgASgEEhQKDGhlYXJ0YmVhdF9tcxgFIAEoDRIRCgltYXhfZnJhbWUYBiABKA0SDgoGc2VydmVyGAcgASgJEg8KB3BlbmRpbmcYCCABKAQSEQoJcGFnZV9zaXplGAkgASgNEhoKEm1heF9pbmZsaWdodF9zZW5kcxgKIAEoDRIjCgdzdW1tYXJ5GAsgASgLMhIuaW5ib3hkLnYxLlN1bW1hcnkSGAoQb2ZmbGluZV90b29fbG9uZxgMIAEoCBIbChN0b2tlbl9leHBpcmVzX2F0X21zGA0gASgDEhMKC2luYm94X2Vwb2NoGA4gASgEIoMBCgdTdW1tYXJ5EiUKBWNvbnZzGAEgAygLMhYuaW5ib3hkLnYxLkNvbnZTdW1tYXJ5Eg8KB3BlbmRpbmcYAiABKAQSEgoKcmVxdWVzdF9pZBgDIAEoBBIQCghoYXNfbW9yZRgEIAEoCBIaChJuZXh0X2JlZm9yZV9tc2dfaWQYBSABKAMiygEKC0NvbnZTdW1tYXJ5Eg8KB2NvbnZfaWQYASABKAMSDgoGdW5yZWFkGAIgASgDEhAKCGxhc3Rfc2VxGAMgASgDEhAKCHJlYWRfc2VxGAQgASgDEhMKC2xhc3RfbXNnX2lkGAUgASgDEhcKD2xhc3Rfc2VuZGVyX3VpZBgGIAEoAxIUCgxsYXN0X3ByZXZpZXcYByABKAkSEgoKbGFzdF9hdF9tcxgIIAEoAxIeChZleHBpcmVkX3VwX3RvX2NvbnZfc2VxGAkgASgDIokBCgpQdWxsUmVzdWx0EhIKCnJlcXVlc3RfaWQYASABKAQSDwoHY29udl9pZBgCIAEoAxIkCghtZXNzYWdlcxgDIAMoCzISLmluYm94ZC52MS5NZXNzYWdlEhAKCGhhc19tb3JlGAQgASgIEh4KFmV4cGlyZWRfdXBfdG9fY29udl9zZXEYBSABKAMiQwoKUmVhZFJlc3VsdBISCgpyZXF1ZXN0X2lkGAEgASgEEg8KB2NvbnZfaWQYAiABKAMSEAoIcmVhZF9zZXEYAyABKAMiZwoPUmVhZENvdW50UmVzdWx0EhIKCnJlcXVlc3RfaWQYASABKAQSDwoHY29udl9pZBgCIAEoAxIQCghjb252X3NlcRgDIAEoAxIMCgRyZWFkGAQgASgDEg8KB21lbWJlcnMYBSABKAMioQEKClNlbmRSZXN1bHQSFQoNY2xpZW50X21zZ19pZBgBIAEoCRIOCgZtc2dfaWQYAiABKAMSEAoIY29udl9zZXEYAyABKAMSJQoGc3RhdHVzGAQgASgOMhUuaW5ib3hkLnYxLlNlbmRTdGF0dXMSIgoEY29kZRgFIAEoDjIULmluYm94ZC52MS5FcnJvckNvZGUSDwoHbWVzc2FnZRgGIAEoCSLCAQoHTWVzc2FnZRILCgNzZXEYASABKAQSDgoGbXNnX2lkGAIgASgDEg8KB2NvbnZfaWQYAyABKAMSEAoIY29udl9zZXEYBCABKAMSEgoKc2VuZGVyX3VpZBgFIAEoAxIMCgRraW5kGAYgASgNEgwKBHRleHQYByABKAkSFQoNY3JlYXRlZF9hdF9tcxgIIAEoAxIfCgVldmVudBgJIAEoCzIQLmluYm94ZC52MS5FdmVudBIPCgdleHBpcmVkGAogASgIIjcKDEV4cGlyZWRSYW5nZRIPCgdjb252X2lkGAEgASgDEhYKDnVwX3RvX2NvbnZfc2VxGAIgASgDImYKBUV2ZW50EiIKBHR5cGUYASABKA4yFC5pbmJveGQudjEuRXZlbnRUeXBlEg8KB2NvbnZfaWQYAiABKAMSFgoOdXBfdG9fY29udl9zZXEYAyABKAMSEAoIcGVlcl91aWQYBCABKAMiqgEKBUJhdGNoEh0KBGxhbmUYASABKA4yDy5pbmJveGQudjEuTGFuZRIkCghtZXNzYWdlcxgCIAMoCzISLmluYm94ZC52MS5NZXNzYWdlEhAKCGhhc19tb3JlGAMgASgIEhAKCGJhdGNoX2lkGAQgASgEEg4KBm5ld2VzdBgFIAEoCBIoCgdleHBpcmVkGAYgAygLMhcuaW5ib3hkLnYxLkV4cGlyZWRSYW5nZSJ3CgVFcnJvchIiCgRjb2RlGAEgASgOMhQuaW5ib3hkLnYxLkVycm9yQ29kZRIPCgdtZXNzYWdlGAIgASgJEhYKDnJldHJ5X2FmdGVyX21zGAMgASgNEg0KBWZhdGFsGAQgASgIEhIKCnJlcXVlc3RfaWQYBSABKAQiOgoNUmVmcmVzaFJlc3VsdBISCgpyZXF1ZXN0X2lkGAEgASgEEhUKDWV4cGlyZXNfYXRfbXMYAiABKAMiFQoEUG9uZxINCgVub25jZRgBIAEoBCKTAQoKU2VuZFJlY29yZBISCgpzZW5kZXJfdWlkGAEgASgDEhUKDXNlbmRlcl9kZXZpY2UYAiABKAkSFQoNY2xpZW50X21zZ19pZBgDIAEoCRIPCgdjb252X2lkGAQgASgDEgwKBGtpbmQYBSABKA0SDAoEdGV4dBgGIAEoCRIWCg5yZWNlaXZlZF9hdF9tcxgHIAEoAyKZAQoKSW5ib3hFbnRyeRIOCgZtc2dfaWQYASABKAMSDwoHY29udl9pZBgCIAEoAxIQCghjb252X3NlcRgDIAEoAxISCgpzZW5kZXJfdWlkGAQgASgDEgwKBGtpbmQYBSABKA0SFQoNY3JlYXRlZF9hdF9tcxgGIAEoAxIfCgVldmVudBgHIAEoCzIQLmluYm94ZC52MS5FdmVudCpPCgpTZW5kU3RhdHVzEhsKF1NFTkRfU1RBVFVTX1VOU1BFQ0lGSUVEEAASCgoGU1RPUkVEEAESDAoIUkVKRUNURUQQAhIKCgZGQUlMRUQQAypDCglFdmVudFR5cGUSDgoKRVZFTlRfTk9ORRAAEg0KCVJFQURfU1lOQxABEg0KCURFTElWRVJFRBACEggKBFJFQUQQAyo0CgRMYW5lEhQKEExBTkVfVU5TUEVDSUZJRUQQABIICgRMSVZFEAESDAoIQkFDS0ZJTEwQAirwAgoJRXJyb3JDb2RlEgYKAk9LEAASDQoJQkFEX0ZSQU1FEAESFwoTVU5TVVBQT1JURURfVkVSU0lPThACEhAKDFVOS05PV05fVFlQRRADEhMKD0ZSQU1FX1RPT19MQVJHRRAEEhMKD1VOQVVUSEVOVElDQVRFRBAFEg0KCUZPUkJJRERFThAGEg4KCk5PVF9NRU1CRVIQBxISCg5DT05WX05PVF9GT1VORBAIEhQKEElOVkFMSURfQVJHVU1FTlQQCRIQCgxSQVRFX0xJTUlURUQQChIPCgtVTkFWQUlMQUJMRRALEgsKB1RJTUVPVVQQDBIMCghJTlRFUk5BTBANEhMKD05PVF9JTVBMRU1FTlRFRBAOEhQKEFNFU1NJT05fUkVQTEFDRUQQDxIRCg1TTE9XX0NPTlNVTUVSEBASEgoOTElNSVRfRVhDRUVERUQQERIRCg1UT0tFTl9FWFBJUkVEEBISCwoHUkVWT0tFRBATQiJaIGdpdGh1Yi5jb20vaW5ib3hkL2luYm94ZC93aXJlL3BiYgZwcm90bzM");
var HelloSchema = /* @__PURE__ */ messageDesc(file_inboxd, 0);
var SendSchema = /* @__PURE__ */ messageDesc(file_inboxd, 1);
var AckSchema = /* @__PURE__ */ messageDesc(file_inboxd, 2);
var PingSchema = /* @__PURE__ */ messageDesc(file_inboxd, 3);
var SummaryRequestSchema = /* @__PURE__ */ messageDesc(file_inboxd, 4);
var PullSchema = /* @__PURE__ */ messageDesc(file_inboxd, 5);
var ReadSchema = /* @__PURE__ */ messageDesc(file_inboxd, 6);
var AckRangeSchema = /* @__PURE__ */ messageDesc(file_inboxd, 7);
var RefreshSchema = /* @__PURE__ */ messageDesc(file_inboxd, 8);
var ReadCountSchema = /* @__PURE__ */ messageDesc(file_inboxd, 9);
var WelcomeSchema = /* @__PURE__ */ messageDesc(file_inboxd, 10);
var SummarySchema = /* @__PURE__ */ messageDesc(file_inboxd, 11);
var PullResultSchema = /* @__PURE__ */ messageDesc(file_inboxd, 13);
var ReadResultSchema = /* @__PURE__ */ messageDesc(file_inboxd, 14);
var ReadCountResultSchema = /* @__PURE__ */ messageDesc(file_inboxd, 15);
var SendResultSchema = /* @__PURE__ */ messageDesc(file_inboxd, 16);
var BatchSchema = /* @__PURE__ */ messageDesc(file_inboxd, 20);
var ErrorSchema = /* @__PURE__ */ messageDesc(file_inboxd, 21);
var RefreshResultSchema = /* @__PURE__ */ messageDesc(file_inboxd, 22);
var PongSchema = /* @__PURE__ */ messageDesc(file_inboxd, 23);
var ErrorCode = /* @__PURE__ */ ((ErrorCode2) => {
  ErrorCode2[ErrorCode2["OK"] = 0] = "OK";
  ErrorCode2[ErrorCode2["BAD_FRAME"] = 1] = "BAD_FRAME";
  ErrorCode2[ErrorCode2["UNSUPPORTED_VERSION"] = 2] = "UNSUPPORTED_VERSION";
  ErrorCode2[ErrorCode2["UNKNOWN_TYPE"] = 3] = "UNKNOWN_TYPE";
  ErrorCode2[ErrorCode2["FRAME_TOO_LARGE"] = 4] = "FRAME_TOO_LARGE";
  ErrorCode2[ErrorCode2["UNAUTHENTICATED"] = 5] = "UNAUTHENTICATED";
  ErrorCode2[ErrorCode2["FORBIDDEN"] = 6] = "FORBIDDEN";
  ErrorCode2[ErrorCode2["NOT_MEMBER"] = 7] = "NOT_MEMBER";
  ErrorCode2[ErrorCode2["CONV_NOT_FOUND"] = 8] = "CONV_NOT_FOUND";
  ErrorCode2[ErrorCode2["INVALID_ARGUMENT"] = 9] = "INVALID_ARGUMENT";
  ErrorCode2[ErrorCode2["RATE_LIMITED"] = 10] = "RATE_LIMITED";
  ErrorCode2[ErrorCode2["UNAVAILABLE"] = 11] = "UNAVAILABLE";
  ErrorCode2[ErrorCode2["TIMEOUT"] = 12] = "TIMEOUT";
  ErrorCode2[ErrorCode2["INTERNAL"] = 13] = "INTERNAL";
  ErrorCode2[ErrorCode2["NOT_IMPLEMENTED"] = 14] = "NOT_IMPLEMENTED";
  ErrorCode2[ErrorCode2["SESSION_REPLACED"] = 15] = "SESSION_REPLACED";
  ErrorCode2[ErrorCode2["SLOW_CONSUMER"] = 16] = "SLOW_CONSUMER";
  ErrorCode2[ErrorCode2["LIMIT_EXCEEDED"] = 17] = "LIMIT_EXCEEDED";
  ErrorCode2[ErrorCode2["TOKEN_EXPIRED"] = 18] = "TOKEN_EXPIRED";
  ErrorCode2[ErrorCode2["REVOKED"] = 19] = "REVOKED";
  return ErrorCode2;
})(ErrorCode || {});

// src/errors.ts
function codeName(code) {
  const n = ErrorCode[code];
  return typeof n === "string" ? n : "INTERNAL";
}
var InboxdError = class extends Error {
  code;
  retryAfterMs;
  fatal;
  constructor(code, message, retryAfterMs = 0, fatal = false) {
    super(`${code}: ${message}`);
    this.name = "InboxdError";
    this.code = code;
    this.retryAfterMs = retryAfterMs;
    this.fatal = fatal;
  }
};
var ClientStoppedError = class extends Error {
  reason;
  /** the server's error (replaced, revoked) */
  serverError;
  constructor(reason, serverError2) {
    const words = { closed: "closed", replaced: "session replaced", revoked: "revoked" }[reason];
    super(serverError2 ? `client: ${words}: ${serverError2.message}` : `client: ${words}`);
    this.name = "ClientStoppedError";
    this.reason = reason;
    this.serverError = serverError2;
  }
};
var NotConnectedError = class extends Error {
  constructor(message = "client: not connected") {
    super(message);
    this.name = "NotConnectedError";
  }
};
var StopDelivery = class extends Error {
  constructor() {
    super("client: stop delivery");
    this.name = "StopDelivery";
  }
};

// src/frame.ts
var VERSION = 1;
var FrameType = {
  hello: 1,
  send: 2,
  ack: 3,
  ping: 4,
  summaryRequest: 5,
  pull: 6,
  read: 7,
  ackRange: 8,
  readCount: 9,
  refresh: 10,
  welcome: 64,
  sendResult: 65,
  batch: 66,
  error: 67,
  pong: 68,
  summary: 69,
  pullResult: 70,
  readResult: 71,
  readCountResult: 72,
  refreshResult: 73
};
var clientSchemas = {
  [FrameType.hello]: HelloSchema,
  [FrameType.send]: SendSchema,
  [FrameType.ack]: AckSchema,
  [FrameType.ping]: PingSchema,
  [FrameType.summaryRequest]: SummaryRequestSchema,
  [FrameType.pull]: PullSchema,
  [FrameType.read]: ReadSchema,
  [FrameType.ackRange]: AckRangeSchema,
  [FrameType.readCount]: ReadCountSchema,
  [FrameType.refresh]: RefreshSchema
};
var serverSchemas = {
  [FrameType.welcome]: ["welcome", WelcomeSchema],
  [FrameType.sendResult]: ["sendResult", SendResultSchema],
  [FrameType.batch]: ["batch", BatchSchema],
  [FrameType.error]: ["error", ErrorSchema],
  [FrameType.pong]: ["pong", PongSchema],
  [FrameType.summary]: ["summary", SummarySchema],
  [FrameType.pullResult]: ["pullResult", PullResultSchema],
  [FrameType.readResult]: ["readResult", ReadResultSchema],
  [FrameType.readCountResult]: ["readCountResult", ReadCountResultSchema],
  [FrameType.refreshResult]: ["refreshResult", RefreshResultSchema]
};
function encodeFrame(t, init) {
  const schema = clientSchemas[t];
  const body = toBinary(schema, create(schema, init));
  const out = new Uint8Array(2 + body.length);
  out[0] = VERSION;
  out[1] = t;
  out.set(body, 2);
  return out;
}
function decodeFrame(frame) {
  if (frame.length < 2) throw new InboxdError("BAD_FRAME", `frame of ${frame.length} bytes is shorter than its header`);
  if (frame[0] !== VERSION) {
    throw new InboxdError("UNSUPPORTED_VERSION", `protocol version ${frame[0]} is not supported; this client speaks ${VERSION}`);
  }
  const entry = serverSchemas[frame[1]];
  if (!entry) throw new InboxdError("UNKNOWN_TYPE", `unknown frame type ${frame[1]}`);
  const [type, schema] = entry;
  try {
    return { type, m: fromBinary(schema, frame.subarray(2)) };
  } catch (e) {
    throw new InboxdError("BAD_FRAME", `${type} frame: ${e.message}`);
  }
}
function num(n) {
  if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new InboxdError("BAD_FRAME", `value ${n} exceeds JavaScript's safe integers`);
  }
  return Number(n);
}

// src/limits.ts
var MAX_CLIENT_MSG_ID_LEN = 128;
var MAX_TEXT_LEN = 16 << 10;
var utf8 = new TextEncoder();
function hasLoneSurrogate(s) {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 55296 && c <= 56319) {
      const d = s.charCodeAt(i + 1);
      if (d >= 56320 && d <= 57343) {
        i++;
        continue;
      }
      return true;
    }
    if (c >= 56320 && c <= 57343) return true;
  }
  return false;
}
function checkSend(convId, clientMsgId, text) {
  const bad = (msg) => new InboxdError("INVALID_ARGUMENT", msg);
  if (!Number.isSafeInteger(convId) || convId <= 0) return bad("conv_id must be positive");
  const cmidLen = hasLoneSurrogate(clientMsgId) ? -1 : utf8.encode(clientMsgId).length;
  if (cmidLen === 0 || cmidLen > MAX_CLIENT_MSG_ID_LEN) {
    return bad(`client_msg_id must be 1..${MAX_CLIENT_MSG_ID_LEN} bytes`);
  }
  if (cmidLen < 0 || /[\u0000-\u001f\u007f]/.test(clientMsgId)) return bad("client_msg_id must be printable UTF-8");
  if (utf8.encode(text).length > MAX_TEXT_LEN) return bad(`text exceeds ${MAX_TEXT_LEN} bytes`);
  if (hasLoneSurrogate(text)) return bad("text must be valid UTF-8");
  return void 0;
}

// src/transport.ts
var OPEN2 = 1;
function bytesOf(data) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (Array.isArray(data)) {
    const parts = data;
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
  return void 0;
}
var Conn = class _Conn {
  constructor(ws) {
    this.ws = ws;
    this.closed = new Promise((r) => this.closeResolve = r);
    ws.onmessage = (ev) => {
      const f = bytesOf(ev.data);
      this.lastFrameAt = Date.now();
      if (!f || this.closedFlag) return;
      if (this.frameHandler) this.frameHandler(f);
      else if (this.waiter) {
        const w = this.waiter;
        this.waiter = void 0;
        w(f);
      } else this.queue.push(f);
    };
    ws.onclose = (ev) => this.onClosed(new Error(`connection closed (code ${ev?.code ?? "?"}${ev?.reason ? ": " + ev.reason : ""})`));
    ws.onerror = () => {
      this.closeErr ??= new Error("connection error");
    };
  }
  ws;
  queue = [];
  frameHandler;
  waiter;
  closedFlag = false;
  closeErr;
  closeResolve;
  /** resolves once the connection is closed (by either side) */
  closed;
  /** when the last frame arrived (ms) */
  lastFrameAt = Date.now();
  /** Opens a connection to url within timeoutMs. */
  static open(Impl, url, timeoutMs) {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new Impl(url);
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
        return;
      }
      ws.binaryType = "arraybuffer";
      const timer = setTimeout(() => {
        ws.onopen = ws.onclose = ws.onerror = null;
        try {
          ws.close();
        } catch {
        }
        reject(new Error(`dial ${url}: timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      ws.onopen = () => {
        clearTimeout(timer);
        resolve(new _Conn(ws));
      };
      ws.onerror = () => {
      };
      ws.onclose = (ev) => {
        clearTimeout(timer);
        reject(new Error(`dial ${url}: connection failed (code ${ev?.code ?? "?"})`));
      };
    });
  }
  get isClosed() {
    return this.closedFlag;
  }
  /** Why it closed. */
  get error() {
    return this.closeErr;
  }
  onClosed(err) {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.closeErr ??= err;
    const w = this.waiter;
    this.waiter = void 0;
    w?.(void 0);
    this.closeResolve();
  }
  /** Writes one frame; false when the connection is not open (the frame is not sent). */
  write(frame) {
    if (this.closedFlag || this.ws.readyState !== OPEN2) return false;
    try {
      this.ws.send(frame);
      return true;
    } catch (e) {
      this.close(e);
      return false;
    }
  }
  /** The next frame, or undefined when the connection closed or timeoutMs passed. */
  nextFrame(timeoutMs) {
    const f = this.queue.shift();
    if (f) return Promise.resolve(f);
    if (this.closedFlag) return Promise.resolve(void 0);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = void 0;
        resolve(void 0);
      }, timeoutMs);
      this.waiter = (f2) => {
        clearTimeout(timer);
        resolve(f2);
      };
    });
  }
  /** Hands every frame, those queued first, to h (synchronously, in order). */
  onFrame(h) {
    this.frameHandler = h;
    while (this.queue.length > 0 && this.frameHandler === h) h(this.queue.shift());
  }
  close(err) {
    if (!this.closedFlag) {
      try {
        this.ws.close();
      } catch {
      }
      this.onClosed(err ?? new Error("connection closed by the client"));
    }
  }
};

// src/order.ts
var MAX_GAP_HOLD_MS = 1e4;
var SeqRanges = class {
  rs = [];
  get length() {
    return this.rs.length;
  }
  has(x) {
    let lo = 0;
    let hi = this.rs.length - 1;
    while (lo <= hi) {
      const mid = lo + hi >> 1;
      const r = this.rs[mid];
      if (r.hi < x) lo = mid + 1;
      else if (r.lo > x) hi = mid - 1;
      else return true;
    }
    return false;
  }
  add(lo, hi) {
    if (lo > hi) return;
    const out = [];
    let placed = false;
    for (const r of this.rs) {
      if (r.hi + 1 < lo) out.push(r);
      else if (hi + 1 < r.lo) {
        if (!placed) {
          out.push({ lo, hi });
          placed = true;
        }
        out.push(r);
      } else {
        lo = Math.min(lo, r.lo);
        hi = Math.max(hi, r.hi);
      }
    }
    if (!placed) out.push({ lo, hi });
    this.rs = out;
  }
  remove(x) {
    for (let i = 0; i < this.rs.length; i++) {
      const r = this.rs[i];
      if (x < r.lo || x > r.hi) continue;
      const repl = [];
      if (r.lo < x) repl.push({ lo: r.lo, hi: x - 1 });
      if (x < r.hi) repl.push({ lo: x + 1, hi: r.hi });
      this.rs.splice(i, 1, ...repl);
      return;
    }
  }
  /** Drops every conv_seq at or below x. */
  removeUpTo(x) {
    let i = 0;
    while (i < this.rs.length && this.rs[i].hi <= x) i++;
    this.rs = this.rs.slice(i);
    const first = this.rs[0];
    if (first && first.lo <= x) this.rs[0] = { lo: x + 1, hi: first.hi };
  }
};
var IdSet = class {
  constructor(max) {
    this.max = max;
  }
  max;
  m = /* @__PURE__ */ new Set();
  ring = [];
  next = 0;
  has(id) {
    return this.m.has(id);
  }
  add(id) {
    if (this.max <= 0 || this.m.has(id)) return;
    if (this.ring.length < this.max) this.ring.push(id);
    else {
      this.m.delete(this.ring[this.next]);
      this.ring[this.next] = id;
      this.next = (this.next + 1) % this.ring.length;
    }
    this.m.add(id);
  }
};
var ConvBuf = class {
  /** the in-order high-water mark: highest conv_seq the in-order stream passed */
  hwm = 0;
  /** hwm at start, from the store: at or below it only delivered() knows */
  base = 0;
  /** conv_seqs at or below hwm skipped by a gap release, never handed over */
  passed = new SeqRanges();
  /** conv_seqs above hwm handed over from a newest page */
  ahead = new SeqRanges();
  pending = [];
  /** gap fill by conversation pull: 0 none, 1 running, 2 done */
  pull = 0;
  /** the pull fills the conv_seqs below this one */
  pullTo = 0;
  insert(p) {
    let lo = 0;
    let hi = this.pending.length;
    while (lo < hi) {
      const mid = lo + hi >> 1;
      if (this.pending[mid].m.convSeq <= p.m.convSeq) lo = mid + 1;
      else hi = mid;
    }
    this.pending.splice(lo, 0, p);
  }
  /** Moves the high-water mark to convSeq, which is handed over. */
  advance(convSeq) {
    this.passTo(convSeq - 1);
    this.ahead.removeUpTo(convSeq);
    this.hwm = convSeq;
    this.pullBehind();
  }
  /** Moves the high-water mark to x without handing anything over. */
  passTo(x) {
    let lo = this.hwm + 1;
    for (const r of this.ahead.rs) {
      if (r.lo > x) break;
      if (r.lo > lo) this.passed.add(lo, r.lo - 1);
      lo = Math.max(lo, r.hi + 1);
    }
    if (lo <= x) this.passed.add(lo, x);
    this.ahead.removeUpTo(x);
    this.hwm = Math.max(this.hwm, x);
    this.pullBehind();
  }
  pullBehind() {
    if (this.pull === 2 && this.hwm >= this.pullTo) this.pull = 0;
  }
};
var Order = class {
  constructor(o) {
    this.o = o;
    this.seen = new IdSet(o.dedupeSize);
    this.gapWait = o.gapWaitMs;
  }
  o;
  seen;
  convs = /* @__PURE__ */ new Map();
  /** a newest page's messages not handed over yet, in arrival order */
  newest = [];
  gapWait;
  gapHold = MAX_GAP_HOLD_MS;
  /** the server said the backfill is done */
  idle = false;
  /** when the last backfill batch arrived */
  lastBackfill = 0;
  conv(id) {
    let cb = this.convs.get(id);
    if (!cb) {
      cb = new ConvBuf();
      if (this.o.lastConvSeq) {
        cb.base = this.o.lastConvSeq(id);
        cb.hwm = cb.base;
      }
      this.convs.set(id, cb);
    }
    return cb;
  }
  /** Buffers a message of the inbox (live or backfill lane). */
  add(p) {
    this.conv(p.m.convId).insert(p);
  }
  /** Queues a message of a newest page: handed over first, outside the conversation's order. */
  addNewest(p) {
    this.conv(p.m.convId);
    this.newest.push(p);
  }
  /**
   * Passes over conv's conv_seqs up to upTo, which retention removed. A
   * conversation the client does not follow yet (hwm 0) needs nothing.
   */
  expire(conv, upTo) {
    const cb = this.conv(conv);
    if (cb.hwm > 0 && upTo > cb.hwm) cb.passTo(upTo);
  }
  /** Buffers the answer of a gap fill; partial: the pull gave up before it covered the gap. */
  addPulled(conv, msgs, partial, expiredUpTo, now) {
    const cb = this.convs.get(conv);
    if (!cb) return;
    if (expiredUpTo > 0) this.expire(conv, expiredUpTo);
    if (cb.pull === 1) cb.pull = partial ? 0 : 2;
    for (const m of msgs) cb.insert({ m, arrived: now, expired: false });
  }
  /** Forgets the unconfirmed inbox entries of session s (they come again on the next session). */
  dropSession(s) {
    const ofS = (p) => p.b !== void 0 && p.b.s === s;
    this.newest = this.newest.filter((p) => !ofS(p));
    for (const [id, cb] of this.convs) {
      cb.pending = cb.pending.filter((p) => !ofS(p));
      if (cb.pending.length === 0 && cb.hwm === 0 && cb.ahead.length === 0 && cb.pull !== 1) this.convs.delete(id);
    }
  }
  /** Whether m reached the application before. */
  handedOver(cb, m) {
    if (this.seen.has(m.msgId) || cb.ahead.has(m.convSeq)) return true;
    if (m.convSeq > cb.base && m.convSeq <= cb.hwm && !cb.passed.has(m.convSeq)) return true;
    return this.o.delivered !== void 0 && this.o.delivered(m.msgId);
  }
  /** Whether release has anything to look at. */
  busy() {
    if (this.newest.length > 0) return true;
    for (const cb of this.convs.values()) if (cb.pending.length > 0) return true;
    return false;
  }
  /**
   * Decides, message by message, what goes to the application now. act
   * performs a decision and resolves false when it could not (the handler
   * failed): the message stays, and release stops. applied is called after
   * the order recorded a decision (the conversation's new high-water mark:
   * what the store persists), before the next one.
   */
  async release(now, act, applied) {
    while (this.newest.length > 0) {
      const p = this.newest[0];
      const cb = this.conv(p.m.convId);
      let kind = "newest";
      if (this.handedOver(cb, p.m)) kind = "duplicate";
      else if (p.expired) kind = "expired";
      if (p.m.convSeq <= cb.hwm) p.m.late = true;
      const st = { kind, p };
      if (!await act(st)) return;
      this.newest.shift();
      if (kind === "newest" || kind === "expired") {
        this.seen.add(p.m.msgId);
        if (p.m.convSeq > cb.hwm) cb.ahead.add(p.m.convSeq, p.m.convSeq);
        else cb.passed.remove(p.m.convSeq);
      }
      await applied(st, cb);
    }
    for (const [id, cb] of [...this.convs]) {
      if (!await this.releaseConv(id, cb, now, act, applied)) return;
    }
  }
  async releaseConv(id, cb, now, act, applied) {
    while (cb.pending.length > 0) {
      const p = cb.pending[0];
      if (p.m.convSeq > cb.hwm + 1) {
        const [release, pull] = this.gapReleased(cb, p, now);
        if (pull) {
          cb.pull = 1;
          cb.pullTo = p.m.convSeq;
          await act({ kind: "pull", conv: id, after: cb.hwm, before: p.m.convSeq });
        }
        if (!release) return true;
      }
      let kind = "deliver";
      if (cb.ahead.has(p.m.convSeq)) kind = "newestAgain";
      else if (this.handedOver(cb, p.m)) kind = "duplicate";
      else if (p.expired) kind = "expired";
      else if (p.m.convSeq <= cb.hwm) {
        kind = "late";
        p.m.late = true;
      }
      const st = { kind, p };
      if (!await act(st)) return false;
      cb.pending.shift();
      switch (kind) {
        case "deliver":
          this.seen.add(p.m.msgId);
          break;
        case "late":
          this.seen.add(p.m.msgId);
          cb.passed.remove(p.m.convSeq);
          break;
        case "duplicate":
          cb.passed.remove(p.m.convSeq);
          break;
        case "expired":
          this.seen.add(p.m.msgId);
          cb.passed.remove(p.m.convSeq);
          break;
      }
      if (p.m.convSeq > cb.hwm) cb.advance(p.m.convSeq);
      await applied(st, cb);
    }
    return true;
  }
  /** Whether a message after a gap goes now, and whether a gap fill should start for it (see order.go). */
  gapReleased(cb, p, now) {
    const waited = now - p.arrived;
    const stalled = waited >= this.gapHold && now - this.lastBackfill >= this.gapHold;
    if (!stalled && p.m.lane === "live" && !(this.idle && waited >= this.gapWait)) return [false, false];
    if (cb.hwm === 0) return [true, false];
    if (cb.pull === 1) return [false, false];
    if (cb.pull === 2 && p.m.convSeq <= cb.pullTo) return [true, false];
    return [false, true];
  }
};

// src/convert.ts
function fromProto(pm, lane) {
  return {
    seq: num(pm.seq),
    msgId: pm.msgId.toString(),
    convId: num(pm.convId),
    convSeq: num(pm.convSeq),
    senderUid: num(pm.senderUid),
    kind: pm.kind,
    text: pm.text,
    createdAtMs: num(pm.createdAtMs),
    lane,
    late: false
  };
}
function convSummary(c) {
  return {
    convId: num(c.convId),
    unread: num(c.unread),
    lastSeq: num(c.lastSeq),
    readSeq: num(c.readSeq),
    lastMsgId: c.lastMsgId.toString(),
    lastSenderUid: num(c.lastSenderUid),
    lastPreview: c.lastPreview,
    lastAtMs: num(c.lastAtMs),
    expiredUpTo: num(c.expiredUpToConvSeq)
  };
}
function summary(s) {
  return {
    convs: (s?.convs ?? []).map(convSummary),
    pending: s ? num(s.pending) : 0,
    hasMore: s?.hasMore ?? false,
    nextBeforeMsgId: (s?.nextBeforeMsgId ?? 0n).toString()
  };
}
function welcome(w) {
  return {
    uid: num(w.uid),
    device: w.device,
    cursor: num(w.cursor),
    epoch: w.epoch.toString(),
    heartbeatMs: w.heartbeatMs,
    maxFrame: w.maxFrame,
    server: w.server,
    pending: num(w.pending),
    pageSize: w.pageSize,
    maxInflightSends: w.maxInflightSends,
    summary: summary(w.summary),
    offlineTooLong: w.offlineTooLong,
    tokenExpiresAtMs: num(w.tokenExpiresAtMs)
  };
}
function eventType(t) {
  switch (t) {
    case 1 /* READ_SYNC */:
      return "READ_SYNC";
    case 2 /* DELIVERED */:
      return "DELIVERED";
    case 3 /* READ */:
      return "READ";
  }
  return void 0;
}

// src/receiver.ts
var FILL_GAP_TIMEOUT_MS = 8e3;
var Receiver = class {
  // the lastConvSeq the store holds
  constructor(c, state) {
    this.c = c;
    if (state) {
      this.storeIds = new Set(state.delivered);
      this.persisted = new Map(state.lastConvSeq);
    }
    this.ord = new Order({
      gapWaitMs: c.opts.gapWaitMs,
      dedupeSize: c.opts.dedupeSize,
      lastConvSeq: state ? (id) => state.lastConvSeq.get(id) ?? 0 : void 0,
      delivered: state ? (id) => this.storeIds.has(id) : void 0
    });
  }
  c;
  stats = {
    liveReceived: 0,
    backfillReceived: 0,
    duplicates: 0,
    handled: 0,
    late: 0,
    newestAgain: 0,
    expired: 0,
    gapPulls: 0
  };
  q = [];
  wake;
  ord;
  batches = /* @__PURE__ */ new Set();
  stopped = false;
  // the handler stopped delivery (StopDelivery), or the client closes
  ended = false;
  tick;
  storeIds;
  persisted = /* @__PURE__ */ new Map();
  enqueue(ev) {
    this.q.push(ev);
    const w = this.wake;
    this.wake = void 0;
    w?.();
  }
  /** Confirms what the handler took (partial batches by seq), then stops delivering. */
  closing() {
    return new Promise((done2) => this.enqueue({ kind: "closing", done: done2 }));
  }
  stop() {
    this.ended = true;
    if (this.tick) clearInterval(this.tick);
    this.wake?.();
  }
  run() {
    this.tick = setInterval(() => {
      if (this.ord.busy()) this.wake?.();
    }, Math.max(10, this.c.opts.gapWaitMs / 4));
    void this.loop();
  }
  async loop() {
    while (!this.ended) {
      if (this.q.length === 0) {
        await new Promise((r) => this.wake = r);
        if (this.ended) break;
      }
      while (this.q.length > 0) this.handle(this.q.shift());
      try {
        await this.release();
      } catch (e) {
        this.c.report(e);
      }
      this.confirm();
    }
  }
  handle(ev) {
    switch (ev.kind) {
      case "pulled":
        this.ord.addPulled(ev.conv, ev.msgs, ev.partial, ev.expired, Date.now());
        return;
      case "closing":
        this.closingWaiters.push(ev.done);
        return;
      case "start":
        this.ord.idle = ev.s.welcome.pending === 0n;
        return;
      case "down":
        for (const b of this.batches) if (b.s === ev.s) this.batches.delete(b);
        this.ord.dropSession(ev.s);
        return;
      case "batch":
        try {
          this.onBatch(ev.s, ev.b);
        } catch (e) {
          this.c.report(e);
        }
        return;
    }
  }
  closingWaiters = [];
  onBatch(s, b) {
    const now = Date.now();
    if (b.lane === 2 /* BACKFILL */) {
      this.ord.idle = !b.hasMore;
      this.ord.lastBackfill = now;
    }
    for (const x of b.expired) {
      this.ord.expire(num(x.convId), num(x.upToConvSeq));
      this.c.convs.applyExpired(num(x.convId), num(x.upToConvSeq));
    }
    if (b.messages.length === 0) return;
    const bt = { s, id: b.batchId, size: b.messages.length, handled: [] };
    this.batches.add(bt);
    const lane = b.newest ? "newest" : b.lane === 1 /* LIVE */ ? "live" : "backfill";
    if (b.lane === 1 /* LIVE */) this.stats.liveReceived += b.messages.length;
    else this.stats.backfillReceived += b.messages.length;
    for (const pm of b.messages) {
      if (pm.event) {
        const type = eventType(pm.event.type);
        if (type) {
          const e = { type, convId: num(pm.event.convId), upTo: num(pm.event.upToConvSeq), peerUid: num(pm.event.peerUid), seq: num(pm.seq) };
          this.c.convs.applyEvent(e.type, e.convId, e.upTo);
          const onEvent = this.c.opts.onEvent;
          if (onEvent) this.c.callApp(() => onEvent(e));
        }
        bt.handled.push(pm.seq);
        continue;
      }
      const p = { m: fromProto(pm, lane), b: bt, arrived: now, expired: pm.expired };
      if (b.newest) this.ord.addNewest(p);
      else this.ord.add(p);
    }
  }
  async release() {
    if (!this.stopped) await this.ord.release(Date.now(), (st) => this.act(st), (st, cb) => this.applied(st, cb));
    if (this.closingWaiters.length > 0) {
      this.confirmPartial();
      this.stopped = true;
      for (const w of this.closingWaiters.splice(0)) w();
    }
  }
  /** Carries out one decision of the ordering buffer; false: the handler did not take the message. */
  async act(st) {
    if (st.kind === "pull") {
      void this.fillGap(st.conv, st.after, st.before);
      return true;
    }
    switch (st.kind) {
      case "duplicate":
        this.stats.duplicates++;
        return true;
      case "newestAgain":
        this.stats.newestAgain++;
        return true;
      case "expired":
        this.stats.expired++;
        this.c.convs.applyExpiredEntry(st.p.m);
        return true;
    }
    const p = st.p;
    try {
      await this.c.opts.handler({ ...p.m });
    } catch (err) {
      if (!p.b) {
        this.stopped = err instanceof StopDelivery;
        return false;
      }
      if (err instanceof StopDelivery) {
        this.stopped = true;
        return false;
      }
      this.c.report(err instanceof Error ? err : new Error(String(err)));
      p.b.s.close();
      return false;
    }
    this.c.convs.applyMessage(p.m, this.c.uid);
    this.stats.handled++;
    if (p.m.late) this.stats.late++;
    return true;
  }
  /** After the order recorded a decision: persist it, then count the message as handled in its batch. */
  async applied(st, cb) {
    if (st.kind === "pull") return;
    const p = st.p;
    const store = this.c.opts.store;
    if (store) {
      const u = { delivered: [], lastConvSeq: [] };
      if (st.kind !== "duplicate" && st.kind !== "newestAgain") {
        u.delivered.push(p.m.msgId);
        this.storeIds?.add(p.m.msgId);
      }
      if (cb.hwm > (this.persisted.get(p.m.convId) ?? 0)) {
        u.lastConvSeq.push([p.m.convId, cb.hwm]);
        this.persisted.set(p.m.convId, cb.hwm);
      }
      if (u.delivered.length > 0 || u.lastConvSeq.length > 0) {
        try {
          await store.save(u);
        } catch (e) {
          this.c.report(new Error(`store: save: ${e.message}`, { cause: e }));
          if (p.b) p.b.s.close();
          return;
        }
      }
    }
    if (p.b) p.b.handled.push(BigInt(p.m.seq));
  }
  /** Pulls the messages between hwm and before of a conversation (receive.go's fillGap). */
  async fillGap(conv, hwm, before) {
    const signal = AbortSignal.timeout(FILL_GAP_TIMEOUT_MS);
    const got = [];
    let expired = 0;
    let after = hwm;
    let complete = false;
    while (after + 1 < before && !this.ended) {
      this.stats.gapPulls++;
      try {
        const pg = await this.c.pull(conv, after, 0, Math.min(before - after - 1, 50), { signal });
        if (pg.expiredUpTo > after) {
          expired = pg.expiredUpTo;
          after = Math.min(pg.expiredUpTo, before - 1);
        }
        for (const m of pg.messages) {
          if (m.convSeq < before) {
            got.push(m);
            after = m.convSeq;
          }
        }
        if (!pg.hasMore || pg.messages.length === 0 || after >= before - 1) {
          complete = true;
          break;
        }
      } catch (err) {
        this.c.report(err);
        if (signal.aborted) break;
        const wait = err instanceof InboxdError && err.retryAfterMs > 0 ? err.retryAfterMs : 200;
        await new Promise((r) => setTimeout(r, wait));
        if (signal.aborted) break;
      }
    }
    if (after + 1 >= before) complete = true;
    this.enqueue({ kind: "pulled", conv, msgs: got, partial: !complete, expired });
  }
  /** Acknowledges every batch whose messages were all handled. */
  confirm() {
    if (this.c.opts.noAck) return;
    const acks = /* @__PURE__ */ new Map();
    for (const b of this.batches) {
      if (b.handled.length === b.size) {
        if (b.id !== 0n) acks.set(b.s, [...acks.get(b.s) ?? [], b.id]);
        this.batches.delete(b);
      }
    }
    for (const [s, ids] of acks) if (!s.write(encodeFrame(3, { batchIds: ids }))) s.close();
  }
  /** Acknowledges the handled messages of unfinished batches (once delivery stopped, before closing). */
  confirmPartial() {
    if (this.c.opts.noAck) return;
    this.confirm();
    const acks = /* @__PURE__ */ new Map();
    for (const b of this.batches) if (b.handled.length > 0) acks.set(b.s, [...acks.get(b.s) ?? [], ...b.handled]);
    for (const [s, seqs] of acks) s.write(encodeFrame(3, { seqs }));
  }
};

// src/convs.ts
var Convs = class {
  constructor(onChange) {
    this.onChange = onChange;
  }
  onChange;
  m = /* @__PURE__ */ new Map();
  conv(id) {
    let c = this.m.get(id);
    if (!c) {
      c = {
        convId: id,
        lastSeq: 0,
        readSeq: 0,
        unread: 0,
        peerDelivered: 0,
        peerRead: 0,
        expiredUpTo: 0,
        lastMsgId: "",
        lastSenderUid: 0,
        lastPreview: "",
        lastAtMs: 0
      };
      this.m.set(id, c);
    }
    return c;
  }
  changed(c) {
    c.unread = Math.max(0, c.lastSeq - c.readSeq);
    if (this.onChange) this.onChange({ ...c });
  }
  all() {
    return new Map([...this.m].map(([id, c]) => [id, { ...c }]));
  }
  get(id) {
    const c = this.m.get(id);
    return c ? { ...c } : void 0;
  }
  applySummary(s) {
    for (const cs of s?.convs ?? []) {
      const c = this.conv(num(cs.convId));
      const last = num(cs.lastSeq);
      if (last >= c.lastSeq) {
        c.lastMsgId = cs.lastMsgId.toString();
        c.lastSenderUid = num(cs.lastSenderUid);
        c.lastPreview = cs.lastPreview;
        c.lastAtMs = num(cs.lastAtMs);
      }
      c.lastSeq = Math.max(c.lastSeq, last);
      c.readSeq = Math.max(c.readSeq, num(cs.readSeq));
      c.expiredUpTo = Math.max(c.expiredUpTo, num(cs.expiredUpToConvSeq));
      this.changed(c);
    }
  }
  /** An inbox entry whose body retention removed. */
  applyExpiredEntry(m) {
    const c = this.conv(m.convId);
    c.lastSeq = Math.max(c.lastSeq, m.convSeq);
    c.expiredUpTo = Math.max(c.expiredUpTo, m.convSeq);
    this.changed(c);
  }
  applyExpired(conv, upTo) {
    const c = this.conv(conv);
    c.expiredUpTo = Math.max(c.expiredUpTo, upTo);
    this.changed(c);
  }
  applyRead(conv, seq) {
    const c = this.conv(conv);
    c.readSeq = Math.max(c.readSeq, seq);
    this.changed(c);
  }
  /** A message handed to the application. */
  applyMessage(m, self) {
    const c = this.conv(m.convId);
    if (m.convSeq >= c.lastSeq) {
      c.lastMsgId = m.msgId;
      c.lastSenderUid = m.senderUid;
      c.lastPreview = [...m.text].slice(0, 80).join("");
      c.lastAtMs = m.createdAtMs;
    }
    c.lastSeq = Math.max(c.lastSeq, m.convSeq);
    if (m.senderUid === self) c.readSeq = Math.max(c.readSeq, m.convSeq);
    this.changed(c);
  }
  applyEvent(type, conv, upTo) {
    const c = this.conv(conv);
    switch (type) {
      case "READ_SYNC":
        c.readSeq = Math.max(c.readSeq, upTo);
        c.lastSeq = Math.max(c.lastSeq, upTo);
        break;
      case "DELIVERED":
        c.peerDelivered = Math.max(c.peerDelivered, upTo);
        break;
      case "READ":
        c.peerRead = Math.max(c.peerRead, upTo);
        c.peerDelivered = Math.max(c.peerDelivered, upTo);
        break;
    }
    this.changed(c);
  }
};

// src/client.ts
var SDK_VERSION = "0.1.0";
var MAX_REFRESH_LEAD_MS = 5 * 6e4;
var defaultWebSocket;
function setDefaultWebSocket(ws) {
  defaultWebSocket = ws;
}
var Session = class {
  constructor(c, conn, welcome2) {
    this.c = c;
    this.conn = conn;
    this.welcome = welcome2;
    this.done = new Promise((r) => this.resolveDone = r);
    void conn.closed.then(() => this.end());
  }
  c;
  conn;
  welcome;
  done;
  resolveDone;
  ended = false;
  /** the retry_after_ms of the fatal error the server ended the session with */
  hint = 0;
  /** set when the server's error stops the client (SESSION_REPLACED, REVOKED) */
  stopped;
  pinger;
  write(frame) {
    return this.conn.write(frame);
  }
  close(err) {
    this.conn.close(err);
  }
  /** Starts reading frames and pinging every heartbeat; a connection silent for 3 heartbeats is closed. */
  start() {
    const hb = this.welcome.heartbeatMs > 0 ? this.welcome.heartbeatMs : 2e4;
    let nonce = 0n;
    this.pinger = setInterval(() => {
      if (Date.now() - this.conn.lastFrameAt > 3 * hb) {
        this.close(new Error(`no frame from the server for ${3 * hb} ms`));
        return;
      }
      nonce++;
      if (!this.write(encodeFrame(4, { nonce }))) this.close();
    }, hb);
    this.conn.onFrame((f) => {
      let fr;
      try {
        fr = decodeFrame(f);
      } catch (e) {
        this.c.report(e);
        return;
      }
      this.c.handle(this, fr);
    });
  }
  end() {
    if (this.ended) return;
    this.ended = true;
    if (this.pinger) clearInterval(this.pinger);
    this.resolveDone();
  }
};
function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done2, ms);
    function done2() {
      clearTimeout(t);
      signal.removeEventListener("abort", done2);
      resolve();
    }
    signal.addEventListener("abort", done2);
  });
}
var Client = class _Client {
  opts;
  WS;
  cur;
  lastWelcome;
  closedFlag = false;
  stopErr;
  // why the server stopped the client; undefined after close()
  tok = { cur: "", expMs: 0, stale: false };
  // Sends: every send not answered for good is in pending; those waiting
  // for a slot on the wire are in queue, in issue order. At most limit are
  // on the wire at once (the server's max_inflight_sends).
  pending = /* @__PURE__ */ new Map();
  queue = [];
  inflight = 0;
  // abandoned counts, per client_msg_id, attempts on the wire of the
  // current session whose waiter gave up: each holds a slot until the
  // server answers it.
  abandoned = /* @__PURE__ */ new Map();
  limit = 256;
  nextOrd = 0;
  /** @internal */
  recv;
  /** @internal */
  convs;
  reqs = /* @__PURE__ */ new Map();
  nextReq = 0n;
  sessions = 0;
  stopCtl = new AbortController();
  /** resolves once the client stopped: after close(), or when the server ended it for good (see err) */
  done;
  resolveDone;
  constructor(opts) {
    this.opts = {
      deviceKind: "web",
      dialTimeoutMs: 1e4,
      minBackoffMs: 100,
      maxBackoffMs: 5e3,
      gapWaitMs: 500,
      dedupeSize: 1 << 20,
      clientName: `inboxd-js/${SDK_VERSION}`,
      ...stripUndefined(opts)
    };
    const ws = opts.WebSocket ?? defaultWebSocket ?? globalThis.WebSocket;
    if (!ws) {
      throw new Error(`inboxd: no WebSocket in this environment: pass options.WebSocket (Node 20: import WebSocket from "ws"), or import the SDK's Node entry`);
    }
    this.WS = ws;
    const onConv = this.opts.onConversation;
    this.convs = new Convs(onConv ? (c) => this.callApp(() => onConv(c)) : void 0);
    this.done = new Promise((r) => this.resolveDone = r);
  }
  /**
   * Connects, says hello and waits for the welcome (client.Dial). The client
   * then keeps the connection up (reconnecting as needed) until close(), or
   * until the device logs in on another connection or is revoked, after
   * which it does not reconnect. connect fails when the first connection
   * fails: a wrong token or URL is reported, not retried.
   */
  static async connect(opts) {
    if (!opts.url) throw new Error("inboxd: options.url is required (ws://127.0.0.1:7070/ws)");
    const c = new _Client(opts);
    if (opts.handler) {
      const state = opts.store ? await opts.store.load() : void 0;
      c.recv = new Receiver(c, state);
    }
    let s;
    try {
      s = await c.connectOnce();
    } catch (e) {
      c.stopCtl.abort();
      c.recv?.stop();
      throw e;
    }
    c.cur = s;
    c.lastWelcome = s.welcome;
    c.convs.applySummary(s.welcome.summary);
    c.recv?.run();
    c.run(s).catch((e) => c.report(new Error(`client: stopped by an internal error: ${e.message}`, { cause: e })));
    return c;
  }
  /** The welcome of the current (or last) session. */
  welcome() {
    return this.lastWelcome ? welcome(this.lastWelcome) : void 0;
  }
  /** The uid of the session (0 before the first welcome). */
  get uid() {
    return this.lastWelcome ? num(this.lastWelcome.uid) : 0;
  }
  /** Whether a session is up now. */
  get connected() {
    return this.cur !== void 0 && !this.cur.ended;
  }
  /** undefined while the client runs; once stopped, why (reason "closed", "replaced" or "revoked"). */
  get err() {
    if (!this.closedFlag) return void 0;
    return this.stopErrNow();
  }
  stopErrNow() {
    return this.stopErr ?? new ClientStoppedError("closed");
  }
  /**
   * Ends the session and stops reconnecting; pending sends fail with
   * ClientStoppedError("closed"). What the handler took is confirmed first.
   * It resolves once the client stopped (never rejects: see err).
   */
  async close() {
    if (this.closedFlag) {
      await this.done;
      return;
    }
    this.closedFlag = true;
    const s = this.cur;
    if (this.recv) {
      let timer;
      await Promise.race([this.recv.closing(), new Promise((r) => timer = setTimeout(r, 5e3))]);
      clearTimeout(timer);
    }
    this.stopCtl.abort();
    s?.close();
    if (this.cur && this.cur !== s) this.cur.close();
    await this.done;
  }
  /** Stops the client because the server ended s for good. */
  stoppedBy(s, why) {
    s.stopped = why;
    this.stopWith(why);
    s.close();
  }
  stopWith(err) {
    const first = !this.closedFlag;
    if (first) {
      this.closedFlag = true;
      this.stopErr = err;
      this.report(err);
    }
  }
  /** @internal Calls an application's callback: what it throws is reported, never ends the client. */
  callApp(f) {
    try {
      f();
    } catch (e) {
      this.report(e instanceof Error ? e : new Error(String(e)));
    }
  }
  /** @internal */
  report(err) {
    if (this.opts.onError && err) {
      try {
        this.opts.onError(err);
      } catch {
      }
    }
  }
  /** Dials and completes hello. */
  async connectOnce() {
    const deadline = Date.now() + this.opts.dialTimeoutMs;
    let tok;
    try {
      tok = await this.token();
    } catch (e) {
      throw new Error(`client: token: ${e.message}`, { cause: e });
    }
    let conn;
    try {
      conn = await Conn.open(this.WS, this.opts.url, Math.max(1, deadline - Date.now()));
    } catch (e) {
      throw new Error(`client: dial ${this.opts.url}: ${e.message}`, { cause: e });
    }
    conn.write(encodeFrame(1, { token: tok, deviceKind: this.opts.deviceKind, client: this.opts.clientName }));
    const f = await conn.nextFrame(Math.max(1, deadline - Date.now()));
    if (!f) {
      const why = conn.error?.message ?? "timed out";
      conn.close();
      throw new Error(`client: waiting for welcome: ${why}`);
    }
    let fr;
    try {
      fr = decodeFrame(f);
    } catch (e) {
      conn.close();
      throw new Error(`client: welcome: ${e.message}`, { cause: e });
    }
    if (fr.type === "welcome") return new Session(this, conn, fr.m);
    conn.close();
    if (fr.type === "error") throw this.helloRefused(serverError(fr.m));
    throw new Error(`client: expected welcome, got ${fr.type}`);
  }
  /** Keeps a session up until close(), a replacement or a revocation. */
  async run(first) {
    let s = first;
    let attempt = 0;
    let hint = 0;
    const stop = this.stopCtl.signal;
    for (; ; ) {
      if (s) {
        if (!this.up(s)) {
          s.close();
          this.failPending(new ClientStoppedError("closed"));
          break;
        }
        attempt = 0;
        await s.done;
        if (!stop.aborted && !s.stopped) this.report(new Error(`client: connection lost: ${s.conn.error?.message ?? "closed"}`));
        this.down(s);
        if (s.stopped) {
          this.stopCtl.abort();
          this.failPending(this.stopErrNow());
          break;
        }
        hint = s.hint;
      }
      if (stop.aborted) {
        this.failPending(new ClientStoppedError("closed"));
        break;
      }
      const d = reconnectDelay(this.opts.minBackoffMs, this.opts.maxBackoffMs, attempt, hint);
      attempt++;
      await sleep(d, stop);
      if (stop.aborted) {
        this.failPending(new ClientStoppedError("closed"));
        break;
      }
      hint = 0;
      try {
        s = await this.connectOnce();
      } catch (e) {
        s = void 0;
        if (e instanceof ClientStoppedError) {
          this.stopWith(e);
          this.stopCtl.abort();
          this.failPending(e);
          break;
        }
        this.report(e);
        if (e instanceof InboxdError) hint = e.retryAfterMs;
      }
    }
    this.recv?.stop();
    this.resolveDone();
  }
  /** Makes s the current session and sends every pending send on it, in issue order. */
  up(s) {
    if (this.closedFlag) return false;
    this.cur = s;
    this.lastWelcome = s.welcome;
    this.sessions++;
    this.inflight = 0;
    this.abandoned = /* @__PURE__ */ new Map();
    this.convs.applySummary(s.welcome.summary);
    this.tok.expMs = num(s.welcome.tokenExpiresAtMs);
    this.limit = s.welcome.maxInflightSends > 0 ? s.welcome.maxInflightSends : 256;
    this.queue = [...this.pending.values()].sort((a, b) => a.order - b.order);
    for (const p of this.queue) {
      p.onWire = false;
      p.queued = true;
    }
    this.recv?.enqueue({ kind: "start", s });
    s.start();
    this.pump(s);
    if (this.opts.onWelcome) this.callApp(() => this.opts.onWelcome(welcome(s.welcome)));
    if (this.opts.refreshToken && s.welcome.tokenExpiresAtMs > 0n) void this.keepToken(s, num(s.welcome.tokenExpiresAtMs));
    return true;
  }
  down(s) {
    this.recv?.enqueue({ kind: "down", s });
    if (this.cur === s) this.cur = void 0;
    if (this.opts.onDisconnect) this.callApp(() => this.opts.onDisconnect(s.conn.error));
  }
  failPending(err) {
    for (const [id, p] of this.pending) {
      p.settle(create(SendResultSchema, { clientMsgId: id, status: 3 /* FAILED */, code: 11 /* UNAVAILABLE */, message: err.message }));
    }
    this.pending.clear();
    this.queue = [];
  }
  /** Writes queued sends on s while there is room on the wire. */
  pump(s) {
    while (this.cur === s && this.inflight < this.limit && this.queue.length > 0) {
      const p = this.queue.shift();
      p.queued = false;
      if (!this.fits(s, p)) continue;
      p.onWire = true;
      this.inflight++;
      if (!s.write(p.frame)) {
        s.close();
        return;
      }
    }
  }
  requeue(p) {
    if (p.queued || p.onWire || this.pending.get(p.clientMsgId) !== p) return;
    let i = 0;
    while (i < this.queue.length && this.queue[i].order < p.order) i++;
    this.queue.splice(i, 0, p);
    p.queued = true;
  }
  /**
   * Stores a text message in a conversation; resolves once the server
   * answered STORED (the body is durable and every member's inbox holds it).
   * clientMsgId makes the send idempotent: the client retries it (on
   * reconnects and transient failures) until STORED or REJECTED, and a send
   * again with the same id gets the original msgId and convSeq. Sends go on
   * the wire in the order send was called. A REJECTED send rejects with an
   * InboxdError with the reason's code; a send that can never be stored
   * (wire.CheckSend, or a frame above the welcome's max_frame) is rejected
   * at once. Only opts.signal ends the retrying.
   */
  send(convId, clientMsgId, text, opts = {}) {
    const bad = checkSend(convId, clientMsgId, text);
    if (bad) return Promise.reject(bad);
    if (this.closedFlag) return Promise.reject(this.stopErrNow());
    if (this.pending.has(clientMsgId)) {
      return Promise.reject(new InboxdError("INVALID_ARGUMENT", `a send with client_msg_id "${clientMsgId}" is already in flight`));
    }
    const frame = encodeFrame(2, { clientMsgId, convId: BigInt(convId), kind: 1, text });
    return new Promise((resolve, reject) => {
      const p = {
        clientMsgId,
        frame,
        order: ++this.nextOrd,
        onWire: false,
        queued: true,
        attempts: 0,
        settle: (r) => {
          opts.signal?.removeEventListener("abort", onAbort);
          if (r.status === 1 /* STORED */) resolve({ clientMsgId, msgId: r.msgId.toString(), convSeq: num(r.convSeq) });
          else if (r.status === 2 /* REJECTED */) reject(new InboxdError(codeName(r.code), r.message));
          else reject(this.stopErrNow());
        }
      };
      const onAbort = () => {
        if (this.pending.get(clientMsgId) === p) {
          this.pending.delete(clientMsgId);
          if (p.queued) {
            this.queue = this.queue.filter((q) => q !== p);
            p.queued = false;
          }
          if (p.onWire) this.abandoned.set(clientMsgId, (this.abandoned.get(clientMsgId) ?? 0) + 1);
        }
        reject(opts.signal.reason ?? new Error("aborted"));
      };
      if (opts.signal?.aborted) return onAbort();
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      this.pending.set(clientMsgId, p);
      this.queue.push(p);
      if (this.cur) this.pump(this.cur);
    });
  }
  /** Handles an answer: final ones go to the waiter; transient failures are retried after a growing pause. */
  onSendResult(s, r) {
    if (this.cur !== s) return;
    const p = this.pending.get(r.clientMsgId);
    if (!p || !p.onWire) {
      const n = this.abandoned.get(r.clientMsgId) ?? 0;
      if (n > 0) {
        this.abandoned.set(r.clientMsgId, n - 1);
        this.inflight--;
        this.pump(s);
      }
      return;
    }
    p.onWire = false;
    this.inflight--;
    if (r.status === 1 /* STORED */ || r.status === 2 /* REJECTED */) {
      this.pending.delete(r.clientMsgId);
      p.settle(r);
    } else {
      p.attempts++;
      const wait = Math.min(2 ** Math.min(p.attempts, 6) * 25, 2e3);
      setTimeout(() => {
        this.requeue(p);
        if (this.cur) this.pump(this.cur);
      }, wait);
    }
    this.pump(s);
  }
  /** Whether p's frame is within the welcome's max_frame; one that is not is rejected with FRAME_TOO_LARGE. */
  fits(s, p) {
    const limit = s.welcome.maxFrame;
    if (limit <= 0 || p.frame.length <= limit) return true;
    this.reject(p, 4 /* FRAME_TOO_LARGE */, `the send's frame of ${p.frame.length} bytes exceeds the server's max_frame of ${limit}`);
    return false;
  }
  /** A session the server ended with FRAME_TOO_LARGE: the largest send on the wire is rejected with its words. */
  onFrameTooLarge(s, err) {
    if (this.cur !== s) return;
    let culprit;
    for (const p of this.pending.values()) {
      if (p.onWire && (!culprit || p.frame.length > culprit.frame.length)) culprit = p;
    }
    if (!culprit) return;
    culprit.onWire = false;
    this.inflight--;
    this.reject(culprit, 4 /* FRAME_TOO_LARGE */, `the send's frame of ${culprit.frame.length} bytes: ${err.message.replace(/^FRAME_TOO_LARGE: /, "")}`);
  }
  reject(p, code, msg) {
    this.pending.delete(p.clientMsgId);
    p.settle(create(SendResultSchema, { clientMsgId: p.clientMsgId, status: 2 /* REJECTED */, code, message: msg }));
  }
  /** @internal a frame of session s */
  handle(s, fr) {
    switch (fr.type) {
      case "sendResult":
        this.onSendResult(s, fr.m);
        return;
      case "error": {
        const err = serverError(fr.m);
        if (fr.m.requestId !== 0n && this.answer(fr.m.requestId, fr)) return;
        if (err.code === "SESSION_REPLACED") return this.stoppedBy(s, new ClientStoppedError("replaced", err));
        if (err.code === "REVOKED" && err.fatal) return this.stoppedBy(s, new ClientStoppedError("revoked", err));
        if (err.code === "TOKEN_EXPIRED") this.tok.stale = true;
        this.report(err);
        if (err.code === "FRAME_TOO_LARGE") this.onFrameTooLarge(s, err);
        if (err.fatal) {
          s.hint = err.retryAfterMs;
          s.close(err);
        }
        return;
      }
      case "batch":
        this.recv?.enqueue({ kind: "batch", s, b: fr.m });
        return;
      case "pullResult":
      case "readResult":
      case "readCountResult":
      case "summary":
      case "refreshResult":
        this.answer(fr.m.requestId, fr);
        return;
      case "welcome":
      case "pong":
        return;
    }
  }
  answer(id, fr) {
    const w = this.reqs.get(id);
    if (!w) return false;
    w(fr);
    return true;
  }
  notConnected() {
    return this.closedFlag ? this.stopErrNow() : new NotConnectedError();
  }
  /** Sends a request built with its request_id on s (default: the current session) and waits for the answer. */
  requestOn(s, opts, build) {
    if (!s || s.ended) return Promise.reject(this.notConnected());
    const id = ++this.nextReq;
    return new Promise((resolve, reject) => {
      const cleanup = () => {
        this.reqs.delete(id);
        opts.signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        cleanup();
        reject(opts.signal.reason ?? new Error("aborted"));
      };
      if (opts.signal?.aborted) return onAbort();
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      this.reqs.set(id, (fr) => {
        cleanup();
        if (fr.type === "error") reject(serverError(fr.m));
        else resolve(fr);
      });
      void s.done.then(() => {
        if (!this.reqs.has(id)) return;
        cleanup();
        reject(this.closedFlag ? this.stopErrNow() : new NotConnectedError("client: connection lost before the answer"));
      });
      if (!s.write(build(id))) {
        cleanup();
        reject(this.notConnected());
      }
    });
  }
  /**
   * Reads a conversation's timeline: up to limit (≤ 50) messages after
   * afterConvSeq, or, with beforeConvSeq > 0, the last ones before it; always
   * in ascending conv_seq. Pulls are rate limited per user (RATE_LIMITED
   * carries retryAfterMs).
   */
  async pull(convId, afterConvSeq, beforeConvSeq = 0, limit = 50, opts = {}) {
    const fr = await this.requestOn(
      this.cur,
      opts,
      (requestId) => encodeFrame(6, { requestId, convId: BigInt(convId), afterConvSeq: BigInt(afterConvSeq), beforeConvSeq: BigInt(beforeConvSeq), limit })
    );
    if (fr.type !== "pullResult") throw new Error(`client: pull answered with ${fr.type}`);
    const page = {
      messages: fr.m.messages.map((m) => fromProto(m, "pull")),
      hasMore: fr.m.hasMore,
      expiredUpTo: num(fr.m.expiredUpToConvSeq)
    };
    if (page.expiredUpTo > 0) this.convs.applyExpired(convId, page.expiredUpTo);
    return page;
  }
  /**
   * Marks the conversation read up to upToConvSeq on every device of the
   * user (and, in a direct conversation, tells the peer); resolves to the
   * read position after the request (committed).
   */
  async read(convId, upToConvSeq, opts = {}) {
    const fr = await this.requestOn(
      this.cur,
      opts,
      (requestId) => encodeFrame(7, { requestId, convId: BigInt(convId), upToConvSeq: BigInt(upToConvSeq) })
    );
    if (fr.type !== "readResult") throw new Error(`client: read answered with ${fr.type}`);
    const seq = num(fr.m.readSeq);
    this.convs.applyRead(convId, seq);
    return seq;
  }
  /** How many members of a group read message convSeq, out of those who can see it. */
  async readCount(convId, convSeq, opts = {}) {
    const fr = await this.requestOn(
      this.cur,
      opts,
      (requestId) => encodeFrame(9, { requestId, convId: BigInt(convId), convSeq: BigInt(convSeq) })
    );
    if (fr.type !== "readCountResult") throw new Error(`client: read count answered with ${fr.type}`);
    return { read: num(fr.m.read), members: num(fr.m.members) };
  }
  /** One page of the login summary: conversations with unread messages whose last message is older than beforeMsgId ("0": the first page). */
  async summaryPage(beforeMsgId = "0", opts = {}) {
    const fr = await this.requestOn(this.cur, opts, (requestId) => encodeFrame(5, { requestId, beforeMsgId: BigInt(beforeMsgId) }));
    if (fr.type !== "summary") throw new Error(`client: summary answered with ${fr.type}`);
    this.convs.applySummary(fr.m);
    return summary(fr.m);
  }
  /** The first page of the summary again. */
  summary(opts = {}) {
    return this.summaryPage("0", opts);
  }
  /** Pages through the whole summary (newest last message first). */
  async summaryAll(opts = {}) {
    const all = [];
    let before = "0";
    for (; ; ) {
      const s = await this.summaryPage(before, opts);
      all.push(...s.convs);
      if (!s.hasMore) return all;
      const next = s.nextBeforeMsgId;
      if (BigInt(next) <= 0n || before !== "0" && BigInt(next) >= BigInt(before)) {
        throw new Error(`client: summary page before ${before}: has_more with next_before_msg_id ${next}`);
      }
      before = next;
    }
  }
  /** Confirms every entry of the device's inbox up to seq, including those not fetched. */
  ackRange(seq) {
    const s = this.cur;
    if (!s || !s.write(encodeFrame(8, { upToSeq: BigInt(seq) }))) throw this.notConnected();
  }
  /** The read state of every conversation the client knows of. */
  conversations() {
    return this.convs.all();
  }
  /** One conversation's state (undefined: not known). */
  conversation(convId) {
    return this.convs.get(convId);
  }
  /** The client's counters. */
  stats() {
    return { ...this.recv?.stats ?? emptyStats(), sessions: this.sessions };
  }
  // ---------------------------------------------------------------- tokens
  /** The token for the next hello (token.go's token). */
  async token() {
    if (this.opts.tokenFunc) return this.opts.tokenFunc();
    if (this.tok.cur === "" && !this.tok.stale) this.tok.cur = this.opts.token ?? "";
    const st = this.tok;
    const expired = st.expMs > 0 && Date.now() >= st.expMs;
    if (!this.opts.refreshToken || !st.stale && !expired && st.cur !== "") return st.cur;
    let tok;
    try {
      tok = await this.opts.refreshToken();
    } catch (e) {
      throw new Error(`refreshToken: ${e.message}`, { cause: e });
    }
    this.tok = { cur: tok, expMs: 0, stale: false };
    return tok;
  }
  /** The error of a hello the server refused. */
  helloRefused(err) {
    if (err.code === "REVOKED") return new ClientStoppedError("revoked", err);
    if (err.code === "TOKEN_EXPIRED" || err.code === "UNAUTHENTICATED") this.tok.stale = true;
    return err;
  }
  /** Refreshes s's token before each exp until the session ends (token.go's keepToken). */
  async keepToken(s, expMs) {
    let retry = 0;
    const ended = new AbortController();
    void s.done.then(() => ended.abort());
    const stop = AbortSignal.any([ended.signal, this.stopCtl.signal]);
    for (; ; ) {
      const left = expMs - Date.now();
      let wait = left - Math.min(Math.max(left / 4, 0), MAX_REFRESH_LEAD_MS);
      if (retry > 0) wait = Math.min(this.opts.minBackoffMs * 2 ** Math.min(retry, 10), left / 2);
      await sleep(Math.max(wait, 0), stop);
      if (stop.aborted) return;
      if (Date.now() >= expMs) return;
      try {
        expMs = await this.refresh(s);
        retry = 0;
      } catch (e) {
        if (stop.aborted) return;
        this.report(new Error(`client: token refresh: ${e.message}`, { cause: e }));
        retry++;
      }
    }
  }
  async refresh(s) {
    let timer;
    const tok = await Promise.race([
      this.opts.refreshToken(),
      new Promise((_, rej) => timer = setTimeout(() => rej(new Error("refreshToken: timed out")), this.opts.dialTimeoutMs))
    ]).finally(() => clearTimeout(timer));
    const fr = await this.requestOn(
      s,
      { signal: AbortSignal.timeout(this.opts.dialTimeoutMs) },
      (requestId) => encodeFrame(10, { requestId, token: tok })
    );
    if (fr.type !== "refreshResult") throw new Error(`client: refresh answered with ${fr.type}`);
    const exp = num(fr.m.expiresAtMs);
    this.tok = { cur: tok, expMs: exp, stale: false };
    return exp;
  }
};
function reconnectDelay(minMs, maxMs, attempt, hintMs) {
  const d = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 16));
  return Math.max(hintMs, 0) + Math.floor(Math.random() * d) + 1;
}
function serverError(m) {
  return new InboxdError(codeName(m.code), m.message, m.retryAfterMs, m.fatal);
}
function emptyStats() {
  return { liveReceived: 0, backfillReceived: 0, duplicates: 0, handled: 0, late: 0, newestAgain: 0, expired: 0, gapPulls: 0 };
}
function stripUndefined(o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== void 0));
}

// src/store.ts
var DEFAULT_STORE_DEDUPE = 2e4;
var MemoryStore = class {
  constructor(max = DEFAULT_STORE_DEDUPE) {
    this.max = max;
  }
  max;
  delivered = /* @__PURE__ */ new Set();
  // insertion order is FIFO order
  last = /* @__PURE__ */ new Map();
  async load() {
    return { delivered: [...this.delivered], lastConvSeq: new Map(this.last) };
  }
  async save(u) {
    for (const id of u.delivered) {
      this.delivered.delete(id);
      this.delivered.add(id);
    }
    while (this.delivered.size > this.max) {
      const oldest = this.delivered.values().next().value;
      this.delivered.delete(oldest);
    }
    for (const [conv, seq] of u.lastConvSeq) this.last.set(conv, Math.max(this.last.get(conv) ?? 0, seq));
  }
};

// src/idb.ts
var DELIVERED = "delivered";
var CONVS = "convs";
function req(r) {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}
function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error ?? new Error("IndexedDB transaction aborted"));
  });
}
var IndexedDBStore = class {
  // the oldest key kept
  constructor(name, max = DEFAULT_STORE_DEDUPE, factory = globalThis.indexedDB) {
    this.name = name;
    this.max = max;
    this.factory = factory;
    if (!factory) throw new Error("IndexedDBStore: no indexedDB in this environment (use MemoryStore in Node)");
  }
  name;
  max;
  factory;
  db;
  next = 0;
  // the next key of DELIVERED
  first = 0;
  open() {
    this.db ??= new Promise((resolve, reject) => {
      const r = this.factory.open(this.name, 1);
      r.onupgradeneeded = () => {
        r.result.createObjectStore(DELIVERED);
        r.result.createObjectStore(CONVS);
      };
      r.onsuccess = () => resolve(r.result);
      r.onerror = () => reject(r.error);
      r.onblocked = () => reject(new Error(`IndexedDBStore ${this.name}: open blocked by another connection`));
    });
    return this.db;
  }
  async load() {
    const db = await this.open();
    const tx = db.transaction([DELIVERED, CONVS], "readonly");
    const [keys, ids, convKeys, seqs] = await Promise.all([
      req(tx.objectStore(DELIVERED).getAllKeys()),
      req(tx.objectStore(DELIVERED).getAll()),
      req(tx.objectStore(CONVS).getAllKeys()),
      req(tx.objectStore(CONVS).getAll())
    ]);
    await done(tx);
    this.first = keys.length > 0 ? keys[0] : 0;
    this.next = keys.length > 0 ? keys[keys.length - 1] + 1 : 0;
    const lastConvSeq = /* @__PURE__ */ new Map();
    convKeys.forEach((k, i) => lastConvSeq.set(k, seqs[i]));
    return { delivered: ids, lastConvSeq };
  }
  async save(u) {
    if (u.delivered.length === 0 && u.lastConvSeq.length === 0) return;
    const db = await this.open();
    const tx = db.transaction([DELIVERED, CONVS], "readwrite");
    const d = tx.objectStore(DELIVERED);
    for (const id of u.delivered) d.put(id, this.next++);
    if (this.next - this.first > this.max) {
      const upTo = this.next - this.max;
      d.delete(IDBKeyRange.bound(this.first, upTo, false, true));
      this.first = upTo;
    }
    const c = tx.objectStore(CONVS);
    for (const [conv, seq] of u.lastConvSeq) {
      c.put(seq, conv);
    }
    await done(tx);
  }
  close() {
    void this.db?.then((db) => db.close());
    this.db = void 0;
  }
};
export {
  Client,
  ClientStoppedError,
  DEFAULT_STORE_DEDUPE,
  InboxdError,
  IndexedDBStore,
  MAX_CLIENT_MSG_ID_LEN,
  MAX_TEXT_LEN,
  MemoryStore,
  NotConnectedError,
  SDK_VERSION,
  StopDelivery,
  checkSend,
  codeName,
  reconnectDelay,
  setDefaultWebSocket
};
