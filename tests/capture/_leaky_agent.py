"""An agent that sends secrets every way an application does: credential headers of three
providers, query parameters, URL user-info, HTTP Basic, cookies, a custom auth header, a key
in a JSON body, a nested client secret, a password in tool-call arguments, a bearer token in
a tool's result, and text matching the user's redaction pattern. It checks that the leaky
provider really echoed them back.

Run under ``opentelemetry-instrument``; ``LEAK_URL`` is the provider, ``LEAK_SECRETS`` a JSON
object of the values to send.
"""

from __future__ import annotations

import json
import os

import anthropic
import httpx
import openai

SECRETS: dict[str, str] = json.loads(os.environ["LEAK_SECRETS"])
BASE = os.environ["LEAK_URL"]


def main() -> None:
    client = openai.OpenAI(
        base_url=f"{BASE}/v1",
        api_key=SECRETS["openai"],
        max_retries=0,
        default_headers={
            "x-auth-token": SECRETS["auth_token"],
            "cookie": f"session={SECRETS['cookie']}",
        },
    )
    messages: list[dict[str, object]] = [
        {"role": "user", "content": f"Please file {SECRETS['pattern']} for me."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "login",
                        "arguments": json.dumps({"user": "ann", "password": SECRETS["tool"]}),
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": f"logged in; use Authorization: Bearer {SECRETS['bearer']}",
        },
    ]
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=messages,  # type: ignore[arg-type]
        extra_body={
            "api_key": SECRETS["body"],
            "metadata": {"client_secret": SECRETS["nested"]},
            "github_token": SECRETS["token"],
            "credentials": SECRETS["credentials"],
        },
    )
    text = reply.choices[0].message.content or ""
    assert SECRETS["openai"] in text and "CUSTOM-4242-1717" in text, text
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "again"}], stream=True
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert SECRETS["openai"] in streamed and "CUSTOM-9090-3131" in streamed, streamed

    claude = anthropic.Anthropic(base_url=BASE, api_key=SECRETS["anthropic"], max_retries=0)
    try:
        claude.messages.create(
            model="claude-test", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
        raise AssertionError("the provider refuses every key")
    except anthropic.AuthenticationError as exc:
        assert SECRETS["anthropic"] in str(exc)

    query = f"key={SECRETS['query']}&X-Amz-Signature={SECRETS['signature']}"
    assert httpx.get(f"{BASE}/stock?{query}", auth=("ann", SECRETS["basic"])).status_code == 200
    host = BASE.split("://", 1)[1]
    assert httpx.get(f"http://ann:{SECRETS['userinfo']}@{host}/stock").status_code == 200
    saved = httpx.post(f"{BASE}/notes", headers={"api-key": SECRETS["azure"]}, json={"n": 1})
    assert saved.status_code == 200
    print("agent done")


if __name__ == "__main__":
    main()
