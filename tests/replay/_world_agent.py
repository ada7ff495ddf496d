"""An agent that reads the clock and backs off: 3 s of sleeps around a rate limit.

Prints what it saw; run under ``opentelemetry-instrument`` to record, under ``otel-replay
replay`` to replay.
"""

import asyncio
import datetime
import os
import sys
import time

import openai

started = time.time()
real_start = os.times().elapsed  # real time, which replay leaves alone
print("started", datetime.datetime.now(datetime.timezone.utc).isoformat())
client = openai.OpenAI(base_url=os.environ["STANDIN_URL"] + "/v1", api_key="sk-x", max_retries=0)
for attempt in range(3):
    try:
        reply = client.chat.completions.create(
            model="standin-error" if attempt < 2 else "gpt-4o-mini",
            messages=[{"role": "user", "content": "Where is my order A-1234?"}],
        )
    except openai.RateLimitError:
        print("rate limited; backing off")
        time.sleep(1.0)
        continue
    print("answer:", reply.choices[0].message.content)
    print(f"answered at: {time.time():.6f}", file=sys.stderr)
    break
asyncio.run(asyncio.sleep(1.0))
print("the wall clock moved past the back-off:", time.time() - started >= 3.0)
print(f"real seconds: {os.times().elapsed - real_start:.2f}", file=sys.stderr)
sys.stdout.flush()
