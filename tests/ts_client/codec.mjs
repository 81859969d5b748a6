// skyhop's payload codec for TypeScript clients, written from README "Payload encryption" alone (not
// from skyhop's Python code): if this file needs knowledge README does not give, README is wrong.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { inflateSync } from 'node:zlib';

const ENCRYPTED = 'binary/skyhop-encrypted';
const VERSION = 0x01;
const COMPRESSED = 0x02; // version 1 with the plaintext zlib-compressed: this client reads it, never writes it
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** @typedef {import('@temporalio/client').Payload} Payload */

/** u32be(x) ‖ x */
function framed(/** @type {Buffer} */ field) {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(field.length);
  return Buffer.concat([length, field]);
}

/** "skyhop-payload" ‖ version ‖ u32be(key id) ‖ key id ‖ u32be(inner encoding) ‖ inner encoding */
function associatedData(/** @type {Buffer} */ keyId, /** @type {Buffer} */ inner, version = VERSION) {
  return Buffer.concat([Buffer.from('skyhop-payload'), Buffer.from([version]), framed(keyId), framed(inner)]);
}

/** The first 16 lowercase hex digits of SHA-256(key). */
export function keyId(/** @type {Buffer} */ key) {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

/**
 * The keyring as README says a deployment holds it: SKYHOP_KEY (base64 keys separated by commas) or
 * the file SKYHOP_KEY_FILE names (one base64 key per line); newest first.
 * @returns {Buffer[]}
 */
export function loadKeyring() {
  const text = process.env.SKYHOP_KEY
    ? process.env.SKYHOP_KEY.replaceAll(',', '\n')
    : process.env.SKYHOP_KEY_FILE
      ? readFileSync(process.env.SKYHOP_KEY_FILE, 'ascii')
      : undefined;
  if (text === undefined) throw new Error('set SKYHOP_KEY or SKYHOP_KEY_FILE to the skyhop payload keyring');
  const keys = text
    .split(/\s+/)
    .filter((line) => line !== '')
    .map((line) => Buffer.from(line, 'base64'));
  if (keys.length === 0 || keys.some((key) => key.length !== KEY_BYTES)) {
    throw new Error(`the skyhop keyring must hold base64 lines of ${KEY_BYTES} bytes each`);
  }
  return keys;
}

/** @implements {import('@temporalio/common').PayloadCodec} */
export class SkyhopCodec {
  /** @param {Buffer[]} keys newest first: the first encrypts, all decrypt */
  constructor(keys) {
    this.keys = new Map(keys.map((key) => [keyId(key), key]));
    this.current = keys[0];
    this.currentId = Buffer.from(keyId(keys[0]));
  }

  /** @param {Payload[]} payloads */
  async encode(payloads) {
    return payloads.map((payload) => {
      const inner = Buffer.from(payload.metadata?.encoding ?? new Uint8Array());
      const nonce = randomBytes(NONCE_BYTES);
      const cipher = createCipheriv('aes-256-gcm', this.current, nonce);
      cipher.setAAD(associatedData(this.currentId, inner));
      const sealed = Buffer.concat([cipher.update(payload.data ?? new Uint8Array()), cipher.final()]);
      return {
        metadata: {
          encoding: Buffer.from(ENCRYPTED),
          'skyhop-encoding': inner,
          'skyhop-key-id': this.currentId,
        },
        data: Buffer.concat([Buffer.from([VERSION]), nonce, sealed, cipher.getAuthTag()]),
      };
    });
  }

  /** @param {Payload[]} payloads */
  async decode(payloads) {
    return payloads.map((payload) => {
      const metadata = payload.metadata ?? {};
      if (Buffer.from(metadata.encoding ?? new Uint8Array()).toString() !== ENCRYPTED) {
        return payload; // skyhop's refusals are in clear, so that a sender without the key can read them
      }
      const inner = Buffer.from(metadata['skyhop-encoding'] ?? new Uint8Array());
      const sender = Buffer.from(metadata['skyhop-key-id'] ?? new Uint8Array());
      const key = this.keys.get(sender.toString());
      if (key === undefined) throw new Error(`a payload is encrypted with key ${sender}, which this keyring lacks`);
      const data = Buffer.from(payload.data ?? new Uint8Array());
      const version = data[0];
      if (version !== VERSION && version !== COMPRESSED) {
        throw new Error(`a payload is in format version ${version}; this client reads 1 and 2`);
      }
      const nonce = data.subarray(1, 1 + NONCE_BYTES);
      const sealed = data.subarray(1 + NONCE_BYTES, data.length - TAG_BYTES);
      const decipher = createDecipheriv('aes-256-gcm', key, nonce);
      decipher.setAAD(associatedData(sender, inner, version));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(sealed), decipher.final()]); // throws if tampered
      return { metadata: { encoding: inner }, data: version === COMPRESSED ? inflateSync(plain) : plain };
    });
  }
}
