"""The LLM SDK clients keep an idle connection for a minute, not httpx's 5 s:
a spoken turn's answer plays longer than that, and the next turn's request
would pay a new TCP and TLS handshake before its first token."""

from __future__ import annotations

import time

import anyio
from anyio.abc import SocketStream

from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.script import ScriptedReply, text
from voice_membrane.vendors.http_pool import KEEPALIVE_S
from voice_membrane.vendors.openai_client import async_client

GAP_S = 6.0  # longer than httpx's default keep-alive


def test_a_request_after_a_spoken_answer_s_pause_reuses_the_connection() -> None:
    assert KEEPALIVE_S > GAP_S
    with FakeOpenAI(*[ScriptedReply([text("Hello.")])] * 2) as fake:
        host, port = fake.base_url.removeprefix("http://").split("/")[0].split(":")
        accepted: list[float] = []

        async def relay(client: SocketStream) -> None:
            accepted.append(time.monotonic())
            async with client, await anyio.connect_tcp(host, int(port)) as server:

                async def pipe(a: SocketStream, b: SocketStream) -> None:
                    try:
                        async for data in a:
                            await b.send(data)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        pass
                    finally:
                        await b.send_eof()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(pipe, client, server)
                    tg.start_soon(pipe, server, client)

        async def main() -> None:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
            proxy_port = listener.extra(anyio.abc.SocketAttribute.local_port)
            async with listener, anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, relay)
                client = async_client(
                    "sk-test-0123456789abcdef", f"http://127.0.0.1:{proxy_port}/v1", 10.0
                )
                for turn in range(2):
                    if turn:
                        await anyio.sleep(GAP_S)  # the answer plays, the user speaks
                    reply = await client.chat.completions.create(
                        model="gpt-test", messages=[{"role": "user", "content": "Hi"}]
                    )
                    assert reply.choices[0].message.content == "Hello."
                await client.close()
                tg.cancel_scope.cancel()

        anyio.run(main)
    assert len(accepted) == 1
