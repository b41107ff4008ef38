"""Drives squidbot's gateway with the official OpenAI Python SDK; prints one JSON line."""

import json
import os
import urllib.request

import openai
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

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

metrics_request = urllib.request.Request(
    os.environ["GATEWAY_BASE"] + "/metrics",
    headers={"Authorization": "Bearer " + os.environ["GATEWAY_TOKEN"]},
)
with urllib.request.urlopen(metrics_request) as response:
    exposition = response.read().decode()
samples = {}
for family in text_string_to_metric_families(exposition):
    for sample in family.samples:
        key = sample.name + json.dumps(sample.labels, sort_keys=True)
        samples[key] = sample.value

print(
    json.dumps(
        {
            "models": models,
            "plain": plain.choices[0].message.content,
            "plain_usage": plain.usage.total_tokens,
            "stream": "".join(parts),
            "stream_usage": stream_usage,
            "wrong_key_refused": wrong_key_refused,
            "metrics": samples,
        }
    )
)
