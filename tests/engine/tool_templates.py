"""Chat templates written for the tests, one per call format of engine.tool_format, each writing the
assistant's calls the way the published template of that family does (Qwen 3, Qwen 3.5, GLM-4.6, Llama 3.1:
the round trip in test_tool_calls.py was also run against those four by hand, session 46)."""

HERMES = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}Functions:
<tools>
{% for t in tools %}{{ t | tojson }}
{% endfor %}</tools>
Call one as <tool_call>
{"name": ..., "arguments": ...}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% elif m.role == 'assistant' %}<|im_start|>assistant
{{ m.content }}
{%- for c in m.tool_calls or [] %}
<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role != 'system' %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif %}{% endif %}"""

QWEN_XML = """\
{%- for m in messages %}
{%- if m.role == 'system' or (loop.first and tools) %}<|im_start|>system
{% if m.role == 'system' %}{{ m.content }}{% endif %}
{%- if tools %}
<tools>
{% for t in tools %}<function><name>{{ t.function.name }}</name></function>
{% endfor %}</tools>
Call as <tool_call>
<function=name>
<parameter=key>
value
</parameter>
</function>
</tool_call>{% endif %}<|im_end|>
{% endif %}
{%- if m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% elif m.role == 'assistant' %}<|im_start|>assistant
{{ m.content }}
{%- for c in m.tool_calls or [] %}
<tool_call>
<function={{ c.function.name }}>
{% for k, v in c.function.arguments | items %}<parameter={{ k }}>
{{ v if v is string else v | tojson }}
</parameter>
{% endfor %}</function>
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == 'user' %}<|im_start|>user
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif %}{% endif %}"""

GLM = """\
[gMASK]<sop>
{%- if tools %}<|system|>
# Tools
{% for t in tools %}{{ t | tojson }}
{% endfor %}Call as <tool_call>{name}
<arg_key>{key}</arg_key>
<arg_value>{value}</arg_value>
</tool_call>{% endif %}
{%- for m in messages %}
{%- if m.role == 'user' %}<|user|>
{{ m.content }}
{%- elif m.role == 'assistant' %}<|assistant|>
<think></think>
{%- if m.content %}
{{ m.content }}{% endif %}
{%- for c in m.tool_calls or [] %}
<tool_call>{{ c.function.name }}
{% for k, v in c.function.arguments.items() %}<arg_key>{{ k }}</arg_key>
<arg_value>{{ v if v is string else v | tojson }}</arg_value>
{% endfor %}</tool_call>
{%- endfor %}
{%- elif m.role == 'tool' %}<|observation|>
<tool_response>
{{ m.content }}
</tool_response>
{%- elif m.role == 'system' %}<|system|>
{{ m.content }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|assistant|>{% if enable_thinking is defined and not enable_thinking %}
<think></think>{% endif %}{% endif %}"""

LLAMA3 = """\
{{- bos_token }}<|start_header_id|>system<|end_header_id|>

{% if tools %}Environment: ipython
To call a function respond with JSON: {"name": function name, "parameters": dictionary of arguments}.
{% for t in tools %}{{ t | tojson(indent=4) }}
{% endfor %}{% endif %}
{%- if messages[0].role == 'system' %}{{ messages[0].content }}{% endif %}<|eot_id|>
{%- for m in messages %}
{%- if m.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>

{{ m.content }}<|eot_id|>
{%- elif 'tool_calls' in m %}<|start_header_id|>assistant<|end_header_id|>

{"name": "{{ m.tool_calls[0].function.name }}", "parameters": {{ m.tool_calls[0].function.arguments | tojson }}}<|eot_id|>
{%- elif m.role != 'system' %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content }}<|eot_id|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}"""

TEMPLATES = {"hermes": HERMES, "qwen-xml": QWEN_XML, "glm": GLM, "llama3": LLAMA3}

# HERMES whose generation prompt opens the thinking, as Qwen 3.5's does (engine.reasoning's "open" mode)
THINKING_HERMES = HERMES.replace("""{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif %}{% endif %}""", """{%- if add_generation_prompt %}<|im_start|>assistant
<think>
{% if enable_thinking is defined and not enable_thinking %}
</think>

{% endif %}{% endif %}""")
assert THINKING_HERMES != HERMES
