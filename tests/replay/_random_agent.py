"""An agent with no otel-replay code and no ``run()`` block that draws from ``random`` before
its first model call and puts the draw in its prompt, as a few-shot sampler or a greeting
picker does. Prints the prompt and the answer.

    python -m tests.replay._random_agent      # STANDIN_URL: the stand-in's base URL
"""

import os
import random

import openai

greeting = random.choice(["Hi", "Hello", "Hey", "Good day", "Greetings", "Howdy"])
sample = random.sample(range(1_000_000), 3)
client = openai.OpenAI(base_url=os.environ["STANDIN_URL"] + "/v1", api_key="sk-x", max_retries=0)
prompt = f"{greeting}! Examples {sample}: where is A-1234?"
reply = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
)
print("prompt:", prompt)
print("answer:", reply.choices[0].message.content, flush=True)
