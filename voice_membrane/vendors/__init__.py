"""What every engine calling a vendor's service shares, LLM providers and cloud
voices alike: keys and base URLs (``credentials``), one TLS context (``tls``),
the error of a call (``errors``), the one retry policy (``retry``) and the
OpenAI SDK client both the chat provider and the speech engine use
(``openai_client``). Neither engine layer reaches into the other for them."""
