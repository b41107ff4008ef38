"""Drives squidbot's gateway with the official OpenAI Python SDK; prints one JSON line."""

import json
import os

import openai
from openai import OpenAI

base_url = os.environ["GATEWAY_BASE"] + "/v1"
client = OpenAI(base_url=base_url, api_key=os.environ["GATEWAY_TOKEN"], max_retries=0)

models = [model.id for model in client.models.list()]
plain = client.chat.completions.create(
    model=models[0], user="sdk", messages=[{"role": "user", "content": "plain question"}]
)
parts = []
stream_usage = None
stream = client.chat.completions.create(
    model=models[0],
    user="sdk",
    stream=True,
    stream_options={"include_usage": True},
    messages=[{"role": "user", "content": "stream question"}],
)
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        parts.append(chunk.choices[0].delta.content)
    if chunk.usage is not None:
        stream_usage = chunk.usage.total_tokens

try:
    OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
    wrong_key_refused = False
except openai.AuthenticationError:
    wrong_key_refused = True

print(
    json.dumps(
        {
            "models": models,
            "plain": plain.choices[0].message.content,
            "plain_usage": plain.usage.total_tokens,
            "stream": "".join(parts),
            "stream_usage": stream_usage,
            "wrong_key_refused": wrong_key_refused,
        }
    )
)
