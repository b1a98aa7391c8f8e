"""`subclassaot.compile(module)` is the module for everything but calling it (CompiledModule's docstring): attributes (a
`config` of the module's own), submodules, `state_dict`, `parameters()`, `train()`/`eval()`, `.to()`, `load_state_dict`,
nesting in a parent, and what the module's class defines; the cache's facts stay ours. Hugging Face models built from
tiny configs (random weights, no downloads) compile as modules and match eager."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch
from torch import nn

import subclassaot
from subclassaot.tools.explain import explain
from tests.oracle import Call, assert_matches_eager

T = torch.Tensor


@dataclass(frozen=True)
class TinyConfig:
    width: int = 4
    recompile_limit: str = "the module's own, not the compiler's"


class Configured(nn.Module):
    count: T

    def __init__(self) -> None:
        super().__init__()
        self.config = TinyConfig()
        self.entries = "a module attribute named like a cache fact"
        self.lin = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.register_buffer("count", torch.zeros(()))

    @property
    def width(self) -> int:
        return self.config.width

    def describe(self) -> str:
        return f"Configured({self.width})"

    def forward(self, x: T) -> T:
        self.count.add_(1)
        return self.norm(self.lin(x)).relu()  # type: ignore[no-any-return]


def test_module_attributes_do_not_clobber_the_compiled_object() -> None:
    module = Configured()
    compiled = subclassaot.compile(module, backend="eager")
    x = torch.randn(2, 4)
    want = copy.deepcopy(module)(x)
    torch.testing.assert_close(compiled(x), want)
    assert compiled.config is module.config
    assert compiled.compile_config.recompile_limit == 8
    assert compiled.compile_count == 1 and len(compiled.entries) == 1 and compiled.recompile_reasons == ()
    assert module.entries == "a module attribute named like a cache fact"


def test_compiled_module_reads_as_the_module() -> None:
    module = Configured()
    compiled = subclassaot.compile(module, backend="eager")
    assert isinstance(compiled, nn.Module)
    assert compiled.lin is module.lin
    assert compiled.width == 4 and compiled.describe() == "Configured(4)"
    assert list(compiled.state_dict()) == list(module.state_dict())
    assert all(a is b for a, b in zip(compiled.parameters(), module.parameters(), strict=True))
    assert [n for n, _ in compiled.named_modules()] == [n for n, _ in module.named_modules()]
    assert compiled.eval() is compiled and not module.training and not module.lin.training
    assert compiled.train() is compiled and module.training and module.norm.training
    compiled.tag = "set through the compiled object"
    assert module.tag == "set through the compiled object"
    assert "Configured" in repr(compiled)


def test_load_state_dict_and_to_act_on_the_module() -> None:
    source, module = Configured(), Configured()
    compiled = subclassaot.compile(module, backend="eager")
    compiled.load_state_dict(source.state_dict())
    torch.testing.assert_close(module.lin.weight, source.lin.weight)
    assert compiled.to(torch.float64) is compiled and module.lin.weight.dtype == torch.float64
    x = torch.randn(2, 4, dtype=torch.float64)
    torch.testing.assert_close(compiled(x), copy.deepcopy(source).double()(x))


def test_nested_compiled_module_keeps_the_module_names() -> None:
    parent = nn.Sequential(nn.Linear(4, 4))
    module = Configured()
    parent.append(subclassaot.compile(module, backend="eager"))
    assert [k for k in parent.state_dict() if k.startswith("1.")] == [f"1.{k}" for k in module.state_dict()]
    x = torch.randn(2, 4)
    want = copy.deepcopy(parent[0])(x)
    torch.testing.assert_close(parent(x), copy.deepcopy(module)(want))


def test_deepcopy_copies_the_module_and_compiles_afresh() -> None:
    module = Configured()
    compiled = subclassaot.compile(module, backend="eager")
    x = torch.randn(2, 4)
    compiled(x)
    copied = copy.deepcopy(compiled)
    assert isinstance(copied, subclassaot.CompiledModule)
    assert copied.lin is not module.lin and copied.compile_count == 0
    torch.testing.assert_close(copied.lin.weight, module.lin.weight)
    torch.testing.assert_close(copied(x), copy.deepcopy(module)(x))
    assert compiled.compile_count == 1


def test_compiled_module_matches_eager_training() -> None:
    with torch.enable_grad():
        assert_matches_eager(Configured(), lambda: (torch.randn(3, 4),))


def test_explain_a_module_with_a_config() -> None:
    text = str(explain(Configured(), torch.randn(2, 4)))
    assert "self.lin.weight" in text
    compiled = subclassaot.compile(Configured(), backend="eager")
    assert "self.lin.weight" in str(explain(compiled, torch.randn(2, 4)))
    again = subclassaot.compile(compiled, backend="eager")
    assert again.lin is compiled.lin and again.compile_count == 0


# Hugging Face models from tiny configs. Eager attention: the SDPA mask path of transformers reads tensor values into
# Python (`padding_mask.all()`) unless it detects torch.compile; the pipeline refuses that by name.
transformers = pytest.importorskip("transformers")


def _lm_call(vocab: int, *, mask: bool, cache: bool) -> Call:
    ids = torch.randint(0, vocab, (2, 8))
    kwargs: dict[str, object] = {"labels": ids}
    if mask:
        kwargs["attention_mask"] = torch.ones(2, 8, dtype=torch.long)
    if cache:
        kwargs["use_cache"] = False
    return Call(args=(ids,), kwargs=kwargs)


def test_gpt2_trains_like_eager() -> None:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=32, attn_implementation="eager"
    )
    model = transformers.GPT2LMHeadModel(config)
    compiled = subclassaot.compile(copy.deepcopy(model), backend="eager")
    assert compiled.config.n_layer == 2
    with torch.enable_grad():
        assert_matches_eager(model, lambda: _lm_call(100, mask=True, cache=True))


def test_gpt2_two_sgd_steps_equal_eager() -> None:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16, attn_implementation="eager"
    )
    eager = transformers.GPT2LMHeadModel(config)
    compiled = subclassaot.compile(copy.deepcopy(eager), backend="eager")
    for step in range(2):
        losses = []
        for model in (eager, compiled):
            torch.manual_seed(step)  # the same inputs and dropout draws on each side
            call = _lm_call(50, mask=True, cache=True)
            loss = model(*call.args, **call.kwargs).loss
            torch.autograd.backward(loss)
            with torch.no_grad():
                for p in model.parameters():
                    p.sub_(0.1 * p.grad)
                    p.grad = None
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0])
    for (name, a), b in zip(compiled.state_dict().items(), eager.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)
    assert compiled.compile_count == 1, compiled.recompile_reasons


def test_gpt2_with_default_attention_and_no_mask_trains_like_eager() -> None:
    """transformers' SDPA mask builder reads `padding_mask.all()` into Python unless torch.compiler.is_compiling():
    the trace runs as a compile (Note [Dynamo Captures, The Pipeline Compiles]), so no mask needs to be passed."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    with torch.enable_grad():
        assert_matches_eager(model, lambda: _lm_call(50, mask=False, cache=True))


@pytest.mark.slow
def test_llama_trains_like_eager() -> None:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        hidden_size=32,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    with torch.enable_grad():
        assert_matches_eager(transformers.LlamaForCausalLM(config), lambda: _lm_call(100, mask=True, cache=True))


@pytest.mark.slow
def test_bert_trains_like_eager() -> None:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        num_hidden_layers=2,
        num_attention_heads=2,
        hidden_size=32,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    with torch.enable_grad():
        assert_matches_eager(transformers.BertForMaskedLM(config), lambda: _lm_call(100, mask=False, cache=False))


_SMALL = {
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "vocab_size": 100,
    "max_position_embeddings": 32,
}


def _architecture(name: str) -> nn.Module:
    """Tiny Hugging Face models of architectures the other tests do not cover, with their default attention (SDPA):
    grouped-query attention with a sliding window, rotary embeddings, a mixture of experts (data-dependent routing by
    index ops), an encoder-decoder with relative position buckets, another with learned positions."""
    t = transformers
    model: nn.Module  # (transformers is untyped here: its classes are Any)
    if name == "mistral":
        model = t.MistralForCausalLM(t.MistralConfig(**_SMALL, num_key_value_heads=1, sliding_window=4))
    elif name == "qwen2":
        model = t.Qwen2ForCausalLM(t.Qwen2Config(**_SMALL, num_key_value_heads=1))
    elif name == "mixtral":
        model = t.MixtralForCausalLM(
            t.MixtralConfig(**_SMALL, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2)
        )
    elif name == "t5":
        model = t.T5ForConditionalGeneration(
            t.T5Config(
                num_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, vocab_size=100, decoder_start_token_id=0
            )
        )
    else:
        assert name == "bart"
        model = t.BartForConditionalGeneration(
            t.BartConfig(
                encoder_layers=1,
                decoder_layers=1,
                encoder_attention_heads=2,
                decoder_attention_heads=2,
                d_model=32,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                vocab_size=100,
                max_position_embeddings=32,
            )
        )
    return model


@pytest.mark.slow
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name", ["mistral", "qwen2", "mixtral", "t5", "bart"])
def test_hugging_face_architectures_match_eager(name: str, train: bool) -> None:
    torch.manual_seed(0)
    model = _architecture(name).train(train)
    with torch.set_grad_enabled(train):
        assert_matches_eager(model, lambda: _lm_call(100, mask=False, cache=True))


@pytest.mark.parametrize("refused", [False, True])
def test_compile_leaves_fx_module_patching_as_it_was(refused: bool) -> None:
    """A trace marks nn.Module's __call__ and __getattr__ so that fx's tracer skips patching them (torch_internals,
    before `_module_methods_marked`): after a compile, trained or refused, no mark is left, the methods are nn.Module's
    own, and fx's own symbolic trace still records a submodule call as a call_module node."""
    call, getattr_ = nn.Module.__call__, nn.Module.__getattr__
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())

    def program(x: T) -> T:
        out: T = model(x)
        if refused:
            out = out * out.sum().item()  # a value read into Python: refused
        return out

    compiled = subclassaot.compile(program)
    x = torch.randn(4, 3)
    if refused:
        with pytest.raises(subclassaot.UnsupportedError):
            compiled(x)
    else:
        with torch.enable_grad():
            torch.autograd.backward(compiled(x).sum())
    assert nn.Module.__call__ is call and nn.Module.__getattr__ is getattr_
    assert not hasattr(call, "__fx_already_patched") and not hasattr(getattr_, "__fx_already_patched")
    traced = torch.fx.symbolic_trace(nn.Sequential(nn.Linear(3, 2)))
    assert [n.op for n in traced.graph.nodes] == ["placeholder", "call_module", "output"]
