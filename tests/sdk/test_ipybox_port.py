"""ipybox's documented CodeExecutor examples, written out from its docs with only the import
changed (`from ipybox import ...` -> `from ipybox_native import ...`), run against the real
binaries (issue 20, deliverable 7).

Sources (gradion-ai/ipybox at 264ed6c): docs/codeexec.md ("Code execution"), whose snippets
are examples/codexec.py, and docs/quickstart.md ("Quickstart"), whose snippets are
examples/quickstart.py. Each function below carries its section. The examples' own asserts are
the test; where an example only prints, the test checks what it printed.

The Brave Search examples call a stand-in server (brave_search_server.py beside this file)
instead of `npx @brave/brave-search-mcp-server`: SERVER_PARAMS is the one line changed besides
the import, since the tests may not reach the network. The two working_dir examples are skipped:
they compare the kernel's working directory with a host path, and here the kernel sees its
working directory at /app, not at its host path (sdk/python/README.md, "Porting from ipybox").
"""
import asyncio
import contextlib
import io
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

from ipybox_test import IPYBOX, require_sandbox  # noqa: E402

import ipybox_native as ib  # noqa: E402 (the exception types; the examples use only the names below)
import ipybox_native.compat  # noqa: E402 (only to forget generate_mcp_sources between tests)

# --- the import, changed -------------------------------------------------------------------
# ipybox: from ipybox import (ApprovalRequest, CodeExecutionChunk, CodeExecutionResult, CodeExecutor)
from ipybox_native import (  # noqa: E402
    ApprovalRequest,
    CodeExecutionChunk,
    CodeExecutionResult,
    CodeExecutor,
)
# ipybox: from ipybox import ApprovalRequest, CodeExecutionResult, CodeExecutor, generate_mcp_sources
from ipybox_native import generate_mcp_sources  # noqa: E402
from pathlib import Path  # noqa: E402

# ipybox's quickstart: {"command": "npx", "args": ["-y", "@brave/brave-search-mcp-server", ...]}
SERVER_PARAMS = {"command": "/usr/bin/python3", "args": [os.path.join(HERE, "brave_search_server.py")]}


# --- docs/codeexec.md ----------------------------------------------------------------------

async def basic_execution():
    # "Basic execution"
    async with CodeExecutor() as executor:
        result = await executor.execute("print('hello world')")
        assert result.text == "hello world"


async def basic_approval():
    # "Approval" / "Tool calls" (the mcptools.brave_search API generated before, as in
    # docs/apigen.md "Stdio servers")
    await generate_mcp_sources("brave_search", SERVER_PARAMS, Path("mcptools"))
    code = """
    from mcptools.brave_search.brave_image_search import Params, Result, run

    result: Result = run(Params(query="neural topic models", count=3))
    print(f"num results = {len(result.items)}")
    """
    async with CodeExecutor(approve_tool_calls=True) as executor:  # default
        async for item in executor.stream(code):
            match item:
                case ApprovalRequest(tool_name=name, tool_args=args):
                    assert name == "brave_image_search"
                    assert args["query"] == "neural topic models"
                    assert args["count"] == 3
                    await item.accept()
                case CodeExecutionResult():
                    assert item.text == "num results = 3"


async def basic_chunks():
    # "Stream output chunks"
    code = """
    from time import sleep
    print("chunk 1")
    sleep(0.5)
    print("chunk 2")
    """
    async with CodeExecutor() as executor:
        async for item in executor.stream(code, chunks=True):
            match item:
                case CodeExecutionChunk():
                    assert item.text.strip() in ["chunk 1", "chunk 2"]
                case CodeExecutionResult():
                    assert item.text == "chunk 1\nchunk 2"


async def basic_plotting():
    # "Capturing plots"
    code = """
    import matplotlib.pyplot as plt
    plt.plot([1, 2, 3], [1, 4, 9])
    plt.show()
    """
    with tempfile.TemporaryDirectory() as images_dir:
        async with CodeExecutor(images_dir=Path(images_dir)) as executor:
            result = await executor.execute(code)
            assert len(result.images) == 1
            assert result.images[0].exists()
            assert result.images[0].suffix == ".png"


async def custom_timeouts():
    # "Custom timeouts"
    # set custom approval timeout, default is no timeout
    async with CodeExecutor(approval_timeout=10) as executor:
        # set custom execution timeout, default is no timeout
        async for item in executor.stream("...", timeout=10):
            ...


async def kernel_environment():
    # "Kernel environment"
    # IPython kernel does not inherit environment variables from parent process
    # Kernel environment must be explicitly set using the kernel_env parameter
    async with CodeExecutor(kernel_env={"TEST_VAR": "test_val"}) as executor:
        result = await executor.execute("import os; print(os.environ['TEST_VAR'])")
        assert result.text == "test_val"


async def kernel_reset():
    # "Kernel reset"
    async with CodeExecutor() as executor:
        await executor.execute("x = 42")
        result = await executor.execute("print(x)")
        assert result.text == "42"

        await executor.reset()

        code = """
        try:
            print(x)
        except NameError:
            print("x not defined")
        """
        result = await executor.execute(code)
        assert result.text == "x not defined"


async def shell_commands():
    # "Shell commands"
    async with CodeExecutor() as executor:
        # Run a shell command
        result = await executor.execute("!echo hello from shell")
        assert result.text == "hello from shell"

        # Capture shell output into a Python variable
        code = """
        files = !ls /tmp
        print(f"found {len(files)} entries")
        """
        result = await executor.execute(code)

        # Variable interpolation in shell commands
        code = """
        name = "world"
        !echo hello {name}
        """
        result = await executor.execute(code)
        assert result.text == "hello world"


async def bash_magic():
    # "Cell magics"
    code = """
    %%bash
    for i in 1 2 3; do
      echo $i
    done
    """

    async with CodeExecutor() as executor:
        result = await executor.execute(code)
        assert result.text == "1\n2\n3"


async def bash_magic_approval():
    # "Approval" / "Shell commands" (%%bash)
    code = """
    %%bash
    echo hello from bash
    """

    async with CodeExecutor(approve_shell_cmds=True) as executor:
        async for item in executor.stream(code):
            match item:
                case ApprovalRequest(tool_name="shell_magic", tool_args=args):
                    assert "echo hello from bash" in args["cmd"]
                    await item.accept()
                case CodeExecutionResult():
                    assert item.text == "hello from bash"


async def shell_approval():
    # "Approval" / "Shell commands"
    code = """
    name = "world"
    !echo hello {name}
    """
    async with CodeExecutor(approve_shell_cmds=True) as executor:
        async for item in executor.stream(code):
            match item:
                case ApprovalRequest(tool_name="shell", tool_args=args):
                    assert args == {"cmd": "echo hello world"}
                    await item.accept()
                case CodeExecutionResult():
                    assert item.text == "hello world"


async def subprocess_blocking():
    # "Approval" / "Preventing bypass"
    async with CodeExecutor(approve_shell_cmds=True, require_shell_escape=True) as executor:
        # Direct subprocess calls are blocked to prevent bypassing approval
        try:
            await executor.execute('import subprocess; subprocess.run(["echo", "hi"])')
        except Exception as e:
            assert "RuntimeError" in str(e)

        # Shell commands via !cmd still work and go through approval
        async for item in executor.stream("!echo hello"):
            match item:
                case ApprovalRequest():
                    await item.accept()
                case CodeExecutionResult():
                    assert item.text == "hello"


# --- docs/quickstart.md --------------------------------------------------------------------

# "Programmatic MCP tool calling"
CODE = """
from mcptools.brave_search.brave_image_search import Params, Result, run

result: Result = run(Params(query="neural topic models", count=3))

for image in result.items:
    print(f"- [{image.title}]({image.properties.url})")
"""


async def quickstart_basic():
    # "Basic execution"
    async with CodeExecutor() as executor:
        # Execute Python code
        result = await executor.execute("print('hello from Python')")
        print(result.text)

        # Execute a shell command
        result = await executor.execute("!echo hello from shell")
        print(result.text)

        # Mix Python and shell in one block
        code = """
        name = "ipybox"
        !echo hello from {name}

        # Capture shell output into a Python variable
        files = !ls /tmp
        print(f"found {len(files)} entries in /tmp")
        """
        result = await executor.execute(code)
        print(result.text)


async def tool_calling():
    # "Programmatic MCP tool calling"
    await generate_mcp_sources(
        server_name="brave_search",
        server_params=SERVER_PARAMS,
        root_dir=Path("mcptools"),
    )

    async with CodeExecutor() as executor:
        result = await executor.execute(CODE)
        print(result.text)


async def approval():
    # "Approval"
    await generate_mcp_sources(
        server_name="brave_search",
        server_params=SERVER_PARAMS,
        root_dir=Path("mcptools"),
    )

    SEARCH_AND_ECHO = """
    from mcptools.brave_search.brave_image_search import Params, Result, run

    result: Result = run(Params(query="neural topic models", count=3))
    !echo "Found {len(result.items)} images"
    """

    async with CodeExecutor(
        approve_tool_calls=True,  # default
        approve_shell_cmds=True,
    ) as executor:
        async for item in executor.stream(SEARCH_AND_ECHO):
            match item:
                case ApprovalRequest(tool_name="shell" | "shell_magic", tool_args=args):
                    print(f"Shell: {args['cmd']}")
                    await item.accept()
                case ApprovalRequest(tool_name=name, tool_args=args):
                    print(f"Tool call: {name}({args})")
                    await item.accept()
                case CodeExecutionResult(text=text):
                    print(text)


# --- the test ------------------------------------------------------------------------------

class PortCase(unittest.TestCase):
    """Each example in a fresh event loop, in a scratch directory (images/ lands there), with
    workspaces under a scratch XDG_STATE_HOME and no daemon to find (an embedded supervisor)."""

    def setUp(self):
        require_sandbox(self)
        self.tmp = tempfile.mkdtemp(prefix="ipybox-port-")
        self.saved_env = {k: os.environ.get(k) for k in ("IPYBOX_BIN", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")}
        os.environ["IPYBOX_BIN"] = IPYBOX
        os.environ["XDG_STATE_HOME"] = os.path.join(self.tmp, "state")
        os.environ["XDG_RUNTIME_DIR"] = os.path.join(self.tmp, "run")
        os.mkdir(os.environ["XDG_RUNTIME_DIR"], 0o700)
        self.saved_cwd = os.getcwd()
        os.chdir(self.tmp)

    def tearDown(self):
        ipybox_native.compat._SOURCES.clear()
        os.chdir(self.saved_cwd)
        for k, v in self.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_example(self, fn, results, accepted=0):
        """Runs an example; checks that it got `results` CodeExecutionResults and accepted
        `accepted` requests, so that the asserts in its `case` branches did run. Returns what
        it printed."""
        out = io.StringIO()
        seen = []
        made, accept = CodeExecutor._ported, ApprovalRequest.accept

        def ported(executor, r):
            seen.append("result")
            return made(executor, r)

        def accepting(req):
            seen.append("accept")
            return accept(req)

        with mock.patch.object(CodeExecutor, "_ported", ported), \
                mock.patch.object(ApprovalRequest, "accept", accepting), contextlib.redirect_stdout(out):
            asyncio.run(asyncio.wait_for(fn(), 300))
        self.assertEqual((seen.count("result"), seen.count("accept")), (results, accepted), seen)
        return out.getvalue()


class IpyboxExamples(PortCase):

    def test_basic_execution(self):
        self.run_example(basic_execution, 1)

    def test_basic_approval(self):
        self.run_example(basic_approval, 1, 1)

    def test_basic_chunks(self):
        self.run_example(basic_chunks, 1)

    def test_basic_plotting(self):
        self.run_example(basic_plotting, 1)

    def test_custom_timeouts(self):
        self.run_example(custom_timeouts, 1)

    def test_kernel_environment(self):
        self.run_example(kernel_environment, 1)

    def test_kernel_reset(self):
        self.run_example(kernel_reset, 3)

    def test_shell_commands(self):
        self.run_example(shell_commands, 3)

    def test_bash_magic(self):
        self.run_example(bash_magic, 1)

    def test_bash_magic_approval(self):
        self.run_example(bash_magic_approval, 1, 1)

    def test_shell_approval(self):
        self.run_example(shell_approval, 1, 1)

    def test_subprocess_blocking(self):
        self.run_example(subprocess_blocking, 1, 1)

    @unittest.skip("the kernel sees working_dir at /app, not at its host path, so the example's host-path "
                   "comparisons cannot hold (sdk/python/README.md, Porting from ipybox)")
    def test_working_directory_reset(self):
        pass

    @unittest.skip("os.chdir to a host temporary directory: the sandbox does not see the host's /tmp")
    def test_working_directory_persistent(self):
        pass

    def test_quickstart_basic(self):
        out = self.run_example(quickstart_basic, 3)
        self.assertEqual(out.splitlines()[:3], ["hello from Python", "hello from shell", "hello from ipybox"])
        self.assertRegex(out.splitlines()[3], r"^found \d+ entries in /tmp$")

    def test_quickstart_tool_calling(self):
        out = self.run_example(tool_calling, 1, 1)
        self.assertEqual(out.splitlines(), ["- [neural topic models %d](https://images.test/%d)" % (i, i)
                                            for i in range(3)])

    def test_quickstart_approval(self):
        out = self.run_example(approval, 1, 2)
        self.assertEqual(out.splitlines(), [
            "Tool call: brave_image_search({'query': 'neural topic models', 'count': 3})",
            'Shell: echo "Found 3 images"',
            "Found 3 images"])


class Behaviour(PortCase):
    """What ipybox documents but shows no example of: approval_timeout, cancel() and
    execute() accepting on its own, against the real binaries."""

    def test_approval_timeout_rejects_an_undecided_call(self):
        async def run():
            await generate_mcp_sources("brave_search", SERVER_PARAMS)
            code = "from mcptools.brave_search.brave_image_search import run\nrun(query='q', count=1)"
            seen = []
            async with CodeExecutor(approval_timeout=1) as executor:
                with self.assertRaises(ib.ApprovalRejected) as cm:
                    async for item in executor.stream(code):
                        seen.append(item)  # never decided
                self.assertIsInstance(cm.exception, ib.CodeExecutionError)
                self.assertEqual(cm.exception.ename, "ToolRejected")
                self.assertEqual([type(i) for i in seen], [ApprovalRequest])
                # execute() accepts the same call on its own.
                r = await executor.execute(code.replace("run(query='q', count=1)",
                                                        "print(len(run(query='q', count=1).items))"))
                self.assertEqual(r.text, "1")

        with self.assertLogs("ipybox_native", "WARNING") as logs:
            asyncio.run(asyncio.wait_for(run(), 300))
        self.assertTrue(any("approval_timeout" in line for line in logs.output), logs.output)

    def test_cancel_ends_the_stream_and_execute_without_error(self):
        async def run():
            async with CodeExecutor() as executor:
                code = "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)"
                items = []
                async for item in executor.stream(code, chunks=True):
                    items.append(item)
                    executor.cancel()  # after the first chunk: the cell is running
                self.assertEqual([i.text for i in items], ["started\n"])
                task = asyncio.ensure_future(executor.execute(code))
                await asyncio.sleep(1)
                executor.cancel()
                r = await asyncio.wait_for(task, 60)
                self.assertEqual((r.text, r.images), (None, []))
                # The kernel kept its state and goes on.
                self.assertEqual((await executor.execute("x = 5\nx")).text, "5")

        asyncio.run(asyncio.wait_for(run(), 300))


if __name__ == "__main__":
    unittest.main()
