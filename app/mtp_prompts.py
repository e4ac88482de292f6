"""Prompts `strata mtp-train` has the model continue (bundled, no network): chat questions, code to
write or continue, and prose to continue. The model's own continuations are the training text."""
from __future__ import annotations

from app import bench_prompts

CHAT = [
    "What is the capital of France, and what is it known for?", "Explain photosynthesis to a ten-year-old.",
    "Give me three tips for sleeping better.", "How do vaccines train the immune system?",
    "Write a short poem about autumn leaves.", "What causes the seasons on Earth?",
    "Summarise the plot of Romeo and Juliet in a few sentences.", "How does a bicycle stay upright?",
    "What is the difference between weather and climate?", "Suggest a simple dinner recipe with rice and beans.",
    "Why is the sky blue?", "Explain what a prime number is, with examples.",
    "How should I prepare for a job interview?", "What are the planets of the solar system?",
    "Write a polite email asking a colleague to review a document.", "What does a compiler do?",
    "How do I make a cup of green tea properly?", "Describe the water cycle step by step.",
    "What is machine learning, in simple words?", "Give me a packing list for a weekend hiking trip.",
]
CODE = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Write a Python function that returns the n-th Fibonacci number, with a docstring and a test.",
    "Write a JavaScript function that removes duplicates from an array.",
    "Write a SQL query that lists the ten customers with the largest total orders.",
    "Write a Python class for a stack with push, pop and peek.",
    "Explain this code and then improve it:\n\nfor i in range(len(xs)):\n    if xs[i] > m:\n        m = xs[i]",
    "Write a bash script that counts the lines of every .py file in a folder.",
    "Write a Python function that merges two sorted lists into one sorted list.",
]
PROSE_STARTS = [
    "The old lighthouse keeper climbed the stairs one last time, and",
    "In the spring of that year the river rose higher than anyone could remember.",
    "Cities grew along trade routes because",
    "She opened the letter slowly, already knowing what it would say.",
    "The history of the printing press begins long before Gutenberg:",
    "A good cup of coffee depends on three things:",
]


def training_requests() -> list[tuple[str, bool]]:
    """(text, as a chat message) for each bundled prompt: chat and code as user messages, prose and the
    bench's code and prose prompts as plain text to continue."""
    out = [(q, True) for q in CHAT + CODE]
    out += [(p, False) for p in PROSE_STARTS]
    out += [(bench_prompts.prompt(kind, "t", ""), False) for kind in ("code", "prose")]
    return out
