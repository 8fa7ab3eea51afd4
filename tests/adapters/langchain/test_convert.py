"""LangChain values -> sample fields: question, answer, document ids, model usage."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, Generation, LLMResult
from langchain_core.prompt_values import StringPromptValue
from langchain_core.prompts import ChatPromptTemplate
from ragmeter_langchain._convert import (
    answer_of,
    doc_ids_and_texts,
    document_id,
    llm_text_and_usage,
    question_of,
    text_of,
)

from ragmeter.capture import content_doc_id
from ragmeter.errors import InvalidInputError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        ({"question": "q1", "input": "i", "query": "x"}, "q1"),
        ({"input": "i", "query": "x"}, "i"),
        ({"query": "x", "k": 4}, "x"),
        ({"topic": "only value"}, "only value"),
        ({"topic": "a", "other": "b"}, None),
        (HumanMessage("from a message"), "from a message"),
        ([SystemMessage("sys"), HumanMessage("h1"), AIMessage("a"), HumanMessage("h2")], "h2"),
        (
            ChatPromptTemplate.from_messages([("human", "{q}")]).invoke({"q": "templated"}),
            "templated",
        ),
        (StringPromptValue(text="string prompt"), "string prompt"),
        (123, None),
        ([], None),
    ],
)
def test_question_default_rule(value, expected):
    assert question_of(value, None) == expected


def test_question_and_answer_keys():
    assert question_of({"q": "why", "question": "not this"}, "q") == "why"
    assert question_of("a string ignores the key", "q") == "a string ignores the key"
    assert question_of({"q": ["x"]}, lambda v: v["q"][0]) == "x"
    assert answer_of({"answer": AIMessage("yes"), "context": []}, None) == "yes"
    assert answer_of({"result": "r", "text": "t"}, None) == "r"
    assert answer_of({"final": "f"}, "final") == "f"
    assert answer_of([Document("d")], None) is None


def test_missing_keys_raise_naming_the_key():
    with pytest.raises(
        InvalidInputError, match=r"input_key 'q' is not in the run's input \(keys: \['a', 'b'\]\)"
    ):
        question_of({"b": 1, "a": 2}, "q")
    with pytest.raises(InvalidInputError, match="output_key 'answer' is not in the run's output"):
        answer_of({"text": "t"}, "answer")


def test_document_id_rules():
    doc = Document("t", id="A", metadata={"doc_id": "B", "src": "C"})
    no_id = Document("t", metadata={"doc_id": "B", "src": "C"})
    assert document_id(doc) == "A"  # default: Document.id, else metadata["doc_id"], else hash
    assert document_id(no_id) == "B"
    assert document_id(Document("t", id="", metadata={"doc_id": ""})) == content_doc_id("t")
    assert document_id(doc, "metadata.src") == "C"  # the key first
    assert document_id(Document("t", id="A"), "metadata.src") == "A"  # then Document.id
    assert document_id(no_id, "id") == content_doc_id("t")
    assert document_id(doc, "content") == content_doc_id("t")
    assert document_id(doc, lambda d: d.metadata["src"] + "!") == "C!"


def test_bad_doc_id_rule_names_the_choices():
    with pytest.raises(
        InvalidInputError, match=r"doc_id must be None .*'metadata.<key>'.*got 'src'"
    ):
        document_id(Document("t"), "src")


def test_id_key_is_a_deprecated_alias_of_doc_id():
    no_id = Document("t", metadata={"doc_id": "B", "src": "C"})
    with pytest.warns(
        DeprecationWarning, match=r"document_id\(id_key=...\) is deprecated; use doc_id="
    ):
        assert document_id(no_id, id_key="src") == "C"
    with pytest.warns(DeprecationWarning):
        assert document_id(no_id, id_key=None) == content_doc_id("t")
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInputError, match="doc_id= alone"):
        document_id(no_id, "id", id_key="src")


def test_doc_ids_keep_every_document_in_rank_order():
    docs = [Document("one", id="1"), Document("two"), Document("one", id="1")]
    ids, texts = doc_ids_and_texts(docs)
    assert ids == ["1", content_doc_id("two"), "1"]  # duplicates kept: that is what ranked
    assert texts == ["one", "two", "one"]
    notes: list[str] = []
    ids, _ = doc_ids_and_texts(docs, doc_id=lambda d: {"one": "x"}[d.page_content], errors=notes)
    assert ids == ["x", content_doc_id("two"), "x"]
    assert notes == [
        "doc_id raised KeyError: 'two' on 1 of 3 document(s); their ids fell back to "
        "Document.id / metadata / content hash"
    ]
    assert doc_ids_and_texts(docs, doc_id=lambda d: None)[0] == ["1", content_doc_id("two"), "1"]


def test_text_of_documents_and_message_content_blocks():
    assert text_of(Document("page")) == "page"
    assert text_of(AIMessage(content=[{"type": "text", "text": "a"}, "b"])) == "ab"


def test_llm_usage_from_messages_then_llm_output():
    chat = LLMResult(
        generations=[
            [
                ChatGeneration(
                    message=AIMessage(
                        "hi",
                        usage_metadata={"input_tokens": 7, "output_tokens": 2, "total_tokens": 9},
                    )
                )
            ]
        ],
        llm_output={"token_usage": {"prompt_tokens": 100, "completion_tokens": 100}},
    )
    assert llm_text_and_usage(chat) == ("hi", 7, 2)  # the message's own count wins
    openai_style = LLMResult(
        generations=[[Generation(text="done")]],
        llm_output={"token_usage": {"prompt_tokens": 12, "completion_tokens": 3}},
    )
    assert llm_text_and_usage(openai_style) == ("done", 12, 3)
    silent = LLMResult(generations=[[Generation(text="quiet")]])
    assert llm_text_and_usage(silent) == ("quiet", None, None)
    assert llm_text_and_usage(LLMResult(generations=[])) == (None, None, None)
