"""Prompts `strata mtp-train` has the model continue (bundled, no network): chat questions, code to
write or continue, and prose to continue. The model's own continuations are the training text."""
from __future__ import annotations

import random
from itertools import zip_longest

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


# more variety, composed: a task in a language, a question form about a topic (none of these is a
# `strata bench` prompt: its acceptance figures are measured on text the layer did not train on)
LANGUAGES = ["Python", "JavaScript", "TypeScript", "Go", "Rust", "C", "Java", "C++"]
TASKS = [
    "reverses a singly linked list", "parses a CSV file and prints the average of one column",
    "counts how often each word occurs in a text", "does a binary search in a sorted array",
    "checks an email address with a regular expression", "reads a JSON config file and fills in defaults",
    "implements an LRU cache with a fixed capacity", "computes the greatest common divisor of two numbers",
    "flattens a nested list", "retries a network request with exponential backoff",
    "converts a Roman numeral to an integer", "finds the shortest path in a grid with breadth-first search",
    "limits how many calls per second another function may make", "merges overlapping intervals",
    "checks whether a Sudoku board is valid", "returns every permutation of a list", "sorts an array with quicksort",
    "formats a number of seconds as h:mm:ss", "keeps the newest record for each key of a list of records",
    "implements a trie with insert and prefix search", "computes a moving average over a stream of numbers",
    "splits a list into chunks of a given size", "validates that brackets in a string are balanced",
    "walks a directory tree and lists files larger than a size",
]
CODE_STARTS = [
    'def parse_duration(text: str) -> int:\n    """Seconds in a duration such as "1h30m" or "45s"."""\n',
    "import json\nfrom pathlib import Path\n\n\nclass Settings:\n    def __init__(self, path: Path):\n",
    "function debounce(fn, ms) {\n  let timer = null;\n",
    "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n",
    "#include <stdio.h>\n#include <stdlib.h>\n\nstruct node {\n    int value;\n",
    "class BankAccount:\n    def __init__(self, owner, balance=0):\n        self.owner = owner\n",
    "SELECT c.name, COUNT(o.id) AS orders\nFROM customers c\n",
    "fn main() {\n    let args: Vec<String> = std::env::args().collect();\n",
    "import unittest\n\n\nclass TestStack(unittest.TestCase):\n    def setUp(self):\n",
    "async function fetchUser(id) {\n  const response = await fetch(`/api/users/${id}`);\n",
]
EDITS = [
    ("total", "amount", "def total(prices):\n    s = 0\n    for p in prices:\n        s += p\n    return s\n\n\n"
     "print(total([1, 2, 3]))\n"),
    ("getName", "displayName", "class User {\n  constructor(name) { this.name = name; }\n"
     "  getName() { return this.name; }\n}\n\nconst u = new User('Ada');\nconsole.log(u.getName());\n"),
    ("count", "n", "def histogram(words):\n    count = {}\n    for w in words:\n"
     "        count[w] = count.get(w, 0) + 1\n    return count\n"),
]
TOPICS = [
    "inflation", "the immune system", "black holes", "version control with git", "compound interest",
    "the French Revolution", "plate tectonics", "how a CPU cache works", "sourdough bread", "climate models",
    "the stock market", "public key cryptography", "the Roman Empire", "electric cars", "how vaccines are tested",
    "recursion in programming", "the water cycle", "time zones", "how airplanes fly", "databases and indexes",
]
FORMS = ["Explain {} in simple terms.", "What are the most common misconceptions about {}?",
         "Write a short summary of {} for a student."]
PROSE_MORE = [
    "The train was already forty minutes late when the lights went out.",
    "Every language has words that cannot be translated, and",
    "The first computers filled whole rooms, yet",
    "On the morning of the election, the small town woke to snow.",
    "Bees communicate the direction of flowers through a dance that",
    "The recipe had been in the family for four generations:",
]


def _composed() -> list[tuple[str, bool]]:
    out = [(f"Write a {lang} function that {task}.", True) for task in TASKS for lang in LANGUAGES[:4]]
    out += [(f"In {lang}, write code that {task}.", True) for task in TASKS[::3] for lang in LANGUAGES[4:]]
    out += [(f"Rename `{a}` to `{b}` everywhere in this code and return the whole code with that one change:"
              f"\n\n```\n{code}```", True) for a, b, code in EDITS]
    out += [(form.format(topic), True) for topic in TOPICS for form in FORMS]
    return out + [(start, False) for start in CODE_STARTS + PROSE_MORE]


def training_requests() -> list[tuple[str, bool]]:
    """(text, as a chat message) for each bundled prompt: chat, code and edit requests as user messages,
    prose and code starts as plain text to continue; interleaved, so that any first part of the list
    (a short run) holds every kind."""
    base = [(q, True) for q in CHAT + CODE] + [(p, False) for p in PROSE_STARTS]
    more = _composed()
    random.Random(0).shuffle(more)
    return [x for pair in zip_longest(base, more) for x in pair if x is not None]
