#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""mooncake_proxy seen by the official openai client: completions and chat, streamed and not,
against the fake instances of test_proxy.sh (decode answers tok0 tok1 ...).
Usage: test_proxy_openai.py BASE_URL MODEL"""
import sys

import openai

base, model = sys.argv[1], sys.argv[2]
c = openai.OpenAI(base_url=base, api_key="sk-test", max_retries=0, timeout=20)

r = c.completions.create(model=model, prompt="San Francisco is a", max_tokens=3)
assert r.choices[0].text == "tok0 tok1 tok2", r

text = "".join(ch.choices[0].text for ch in
               c.completions.create(model=model, prompt="San Francisco is a", max_tokens=3,
                                    stream=True))
assert text == "tok0 tok1 tok2 ", text

r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}],
                              max_tokens=2)
assert r.choices[0].message.content == "tok0 tok1", r

text = "".join(ch.choices[0].delta.content or "" for ch in
               c.chat.completions.create(model=model, stream=True, max_tokens=2,
                                         messages=[{"role": "user", "content": "hi"}]))
assert text == "tok0 tok1 ", text

assert [m.id for m in c.models.list()] == [model]
print("ok")
