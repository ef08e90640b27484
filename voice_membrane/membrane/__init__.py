"""Replies: ``Membrane`` (``membrane.py``) formats a request, calls the provider,
reads its output into events and runs the tool loop, one ``ReplyLoop`` per
reply (``reply_loop``; its calls in ``provider_call``, their reading in
``reply_reader``, its tool rounds in ``tool_round``, its blocks as messages in
``reply_messages``); tools (``tools``, MCP servers in ``tools_mcp``) and
generated images (``images``) run inside it; docs/membrane.md."""
