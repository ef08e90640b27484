"""Several queued messages in one socket write.

``ServerConnection.send`` writes each message to the transport on its own: one
``send()`` system call per 20 ms audio frame, the largest single cost of a
served session in a profile at 100 sessions. The socket sink sends its frames in
batches (``pacing.BatchPacer``); this frames each message of a batch with the
connection's own protocol object (the same bytes ``send`` would write) and
writes them together, inside the connection's ``send_context`` so its state
checks, close handling and backpressure (``drain``) apply as for ``send``.
"""

from __future__ import annotations

from collections.abc import Sequence

from websockets.asyncio.server import ServerConnection


async def send_batch(ws: ServerConnection, messages: Sequence[bytes | str]) -> None:
    """Send ``messages`` (bytes: binary, str: text) in order, in one write;
    raises ``ConnectionClosed`` as ``send`` does."""
    if len(messages) == 1:
        await ws.send(messages[0])
        return
    async with ws.send_context():
        protocol = ws.protocol
        for message in messages:
            if isinstance(message, str):
                protocol.send_text(message.encode())
            else:
                protocol.send_binary(message)
        # Taken here, the frames leave in one write; send_context's own
        # send_data then finds nothing left and only waits for the buffer (drain).
        ws.transport.write(b"".join(protocol.data_to_send()))
