"""The server side of RFC 6455, as much as exec needs: handshake, masked client frames, ping/pong, close."""

from __future__ import annotations

import base64
import hashlib
import struct
import threading
from typing import BinaryIO

__all__ = ["WebSocket", "accept_key"]

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()


class WebSocket:
    """An upgraded connection. ``receive`` returns whole messages (None once closed); sends are locked."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self.reader, self.writer = reader, writer
        self._lock = threading.Lock()
        self.closed = False

    def _read_exact(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.reader.read(count - len(data))
            if not chunk:
                raise ConnectionError("websocket closed")
            data += chunk
        return data

    def _frame(self) -> tuple[bool, int, bytes]:
        first, second = self._read_exact(2)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", self._read_exact(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self._read_exact(8))[0]
        mask = self._read_exact(4) if second & 0x80 else b""
        payload = self._read_exact(length)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return bool(first & 0x80), first & 0x0F, payload

    def receive(self) -> bytes | None:
        message, kind = b"", 0
        try:
            while True:
                final, opcode, payload = self._frame()
                if opcode == PING:
                    self.send(PONG, payload)
                elif opcode == PONG:
                    continue
                elif opcode == CLOSE:
                    self.close()
                    return None
                else:
                    kind = opcode or kind
                    message += payload
                    if final:
                        return message
        except (ConnectionError, OSError, ValueError):
            self.closed = True
            return None

    def send(self, opcode: int, payload: bytes) -> None:
        header = bytes([0x80 | opcode])
        if len(payload) < 126:
            header += bytes([len(payload)])
        elif len(payload) < 2**16:
            header += bytes([126]) + struct.pack("!H", len(payload))
        else:
            header += bytes([127]) + struct.pack("!Q", len(payload))
        with self._lock:
            if self.closed and opcode != CLOSE:
                return
            try:
                self.writer.write(header + payload)
                self.writer.flush()
            except OSError:
                self.closed = True

    def close(self, code: int = 1000) -> None:
        if not self.closed:
            self.send(CLOSE, struct.pack("!H", code))
            self.closed = True
