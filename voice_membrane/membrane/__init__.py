"""Replies: ``Membrane`` (``membrane.py``) formats a request, calls the provider,
reads its output into events and runs the tool loop, one ``ReplyLoop`` per
reply; tools (``tools``, MCP servers in ``tools_mcp``) and generated images
(``images``) run inside it; docs/membrane.md."""
