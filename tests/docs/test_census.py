"""The fence census itself: it must see what Python-Markdown renders, wherever it is nested."""

from page_fences.census import bare_word_options, fences, runnable_python

PAGE = """\
# Title

```python
a = 1
```

!!! note
    ```python
    b = 2
    ```

=== "Tab"

    ```{.python notest}
    c = 3
    ```

- a list item

    ~~~py
    d = 4
    ~~~

````markdown
```python
shown_not_run = True
```
````

```python notest
broken_rendering = True
```
"""


def test_census_counts_nested_and_skips_shown_fences():
    found = fences(PAGE)
    assert [f.line for f in found] == [3, 8, 14, 20, 24, 30]
    assert [f.line for f in runnable_python(PAGE)] == [3, 8, 20]


def test_census_keeps_each_body_as_written():
    by_line = {f.line: f for f in fences(PAGE + "```python\nleft = 'open'\n")}
    assert by_line[8].body == ("    b = 2",)
    assert by_line[24].body == ("```python", "shown_not_run = True", "```")
    assert by_line[33].body == ("left = 'open'",)  # an unclosed fence runs to the end


def test_bare_words_are_flagged_but_brace_form_and_key_values_are_not():
    by_line = {f.line: f for f in fences(PAGE + '```py title="x.py"\npass\n```\n')}
    assert bare_word_options(by_line[30]) == ["notest"]
    assert bare_word_options(by_line[14]) == []
    assert bare_word_options(by_line[33]) == []
