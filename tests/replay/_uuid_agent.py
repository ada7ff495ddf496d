"""An agent that puts ids from the standard library in its prompt, with no otel-replay code:
``uuid.uuid4()``, a ``uuid4`` imported by name, and ``uuid1()``. The openai SDK draws a uuid
of its own for every request (its idempotency key), which is not the agent's.

Prints the prompt and the answer; run under ``opentelemetry-instrument`` to record, under
``otel-replay replay`` to replay.
"""

import os
import sys
import uuid
from uuid import uuid4

import openai

conversation = uuid.uuid4()
client = openai.OpenAI(base_url=os.environ["STANDIN_URL"] + "/v1", api_key="sk-x", max_retries=0)
prompt = f"conversation {conversation}, request {uuid4()}, node {uuid.uuid1()}: where is A-1234?"
reply = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
)
print("prompt:", prompt)
print("answer:", reply.choices[0].message.content)
sys.stdout.flush()
