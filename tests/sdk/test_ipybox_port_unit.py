"""CodeExecutor's ipybox compatibility without a sandbox (compat.py): ipybox's constructor
arguments become the right options, results take ipybox's shape (text stripped or None, images
as files in images_dir), approval_timeout rejects an undecided request, and a Sandbox's
results still count as CodeExecutionResult. test_ipybox_port.py runs ipybox's examples."""
import asyncio
import base64
import json
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))

import ipybox_native as ib  # noqa: E402
import ipybox_native.compat as compat  # noqa: E402

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def result(text, *images):
    return ib.ExecutionResult(text=text, images=[ib.Image(data, mime) for data, mime in images])


class Arguments(unittest.TestCase):
    def test_ipybox_arguments_become_options(self):
        ex = ib.CodeExecutor(tool_server_host="localhost", tool_server_port=1, kernel_gateway_host="localhost",
                             kernel_gateway_port=2, kernel_env={"A": "1"}, connect_timeout=5, kernel_init_timeout=300,
                             sandbox=True, log_level="DEBUG", approve_tool_calls=False, approve_shell_cmds=True,
                             require_shell_escape=True, container_env_var={"B": "2"})
        self.assertEqual(ex._args, ["--container-env-var", "A=1", "--container-env-var", "B=2", "--approve-tools",
                                    "*", "--approve-shell", "--require-shell-escape", "--verbose"])
        self.assertEqual((ex._start_timeout, ex.kernel_env, ex.images_dir), (300.0, {"A": "1"}, Path("images")))

    def test_defaults_ask_for_every_call(self):
        ex = ib.CodeExecutor()
        self.assertEqual(ex._args, [])
        self.assertEqual((ex._start_timeout, ex.approval_timeout), (120.0, None))

    def test_require_shell_escape_needs_approve_shell_cmds(self):
        with self.assertRaisesRegex(ValueError, "require_shell_escape=True requires approve_shell_cmds=True"):
            ib.CodeExecutor(require_shell_escape=True)

    def test_bad_approval_timeout(self):
        for bad in (0, -1):
            with self.assertRaisesRegex(ValueError, "approval_timeout"):
                ib.CodeExecutor(approval_timeout=bad)

    def test_working_dir_is_the_workspace(self):
        ex = ib.CodeExecutor(working_dir=Path("/tmp"))
        self.assertEqual(ex._args, ["--workspace", "/tmp"])
        with self.assertRaisesRegex(ValueError, "working_dir and workspace"):
            ib.CodeExecutor(working_dir="/tmp", workspace="/var/tmp")

    def test_sandbox_config_allowed_domains(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump({"network": {"allowedDomains": ["example.org"]}, "filesystem": {"denyRead": [".env"]}}, f)
            f.flush()
            ex = ib.CodeExecutor(sandbox=True, sandbox_config=Path(f.name), allowed_domain="pypi.org")
            self.assertEqual(ex._args, ["--allowed-domain", "pypi.org", "--allowed-domain", "example.org"])
            f.seek(0)
            f.truncate()
            json.dump({"network": {"allowedDomains": "example.org"}}, f)
            f.flush()
            with self.assertRaisesRegex(ValueError, "allowedDomains must be a list"):
                ib.CodeExecutor(sandbox_config=f.name)
        with self.assertRaisesRegex(ValueError, "sandbox_config /nonexistent.json"):
            ib.CodeExecutor(sandbox_config="/nonexistent.json")

    def test_unknown_keyword_is_still_named(self):
        with self.assertRaisesRegex(TypeError, "no_such_option"):
            ib.CodeExecutor(no_such_option=1)


class Results(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ipybox-port-unit-")
        self.cwd = os.getcwd()
        os.chdir(self.tmp)

    def tearDown(self):
        os.chdir(self.cwd)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_text_is_stripped_or_none(self):
        ex = ib.CodeExecutor()
        self.assertEqual(ex._ported(result("hello world\n")).text, "hello world")
        self.assertEqual(ex._ported(result("\n  1\n2\n3 \n")).text, "1\n2\n3")
        self.assertIsNone(ex._ported(result("")).text)
        r = ex._ported(result("x\n"))
        self.assertIsInstance(r, ib.CodeExecutionResult)
        self.assertEqual((r.images, r.result.text), ([], "x\n"))

    def test_images_are_files_in_images_dir(self):
        ex = ib.CodeExecutor()  # default: images/ in the current directory, made when needed
        self.assertFalse(os.path.exists("images"))
        r = ex._ported(result("", (PNG, "image/png"), (b"<svg/>", "image/svg+xml")))
        self.assertEqual([p.parent for p in r.images], [Path("images")] * 2)
        self.assertEqual([p.suffix for p in r.images], [".png", ".svg"])
        self.assertRegex(r.images[0].name, r"^[0-9a-f]{8}\.png$")
        self.assertTrue(r.images[0].exists())
        self.assertEqual((r.images[0].read_bytes(), r.images[1].read_bytes()), (PNG, b"<svg/>"))
        there = Path(self.tmp, "deep", "er")
        r = ib.CodeExecutor(images_dir=there)._ported(result("", (PNG, "image/png")))
        self.assertEqual((r.images[0].parent, r.images[0].read_bytes()), (there, PNG))

    def test_sandbox_results_still_match_the_old_alias(self):
        self.assertIsInstance(result("x"), ib.CodeExecutionResult)
        self.assertNotIsInstance(ib.CodeExecutionResult(text=None), ib.ExecutionResult)

    def test_timeout_is_asyncio_timeout_error(self):
        self.assertTrue(issubclass(ib.TimeoutError, asyncio.TimeoutError))
        self.assertTrue(issubclass(ib.TimeoutError, ib.IpyboxError))


class ApprovalTimeout(unittest.IsolatedAsyncioTestCase):
    async def test_undecided_request_is_rejected_after_approval_timeout(self):
        ex = ib.CodeExecutor(approval_timeout=0.05)
        ex._loop = asyncio.get_running_loop()
        undecided = ib.ApprovalRequest(ex._loop, "s", "t", {}, "")
        accepted = ib.ApprovalRequest(ex._loop, "s", "t", {}, "")
        ex._approval_created(undecided)
        ex._approval_created(accepted)
        accepted.accept()
        with self.assertLogs("ipybox_native", "WARNING") as logs:
            self.assertIs(await asyncio.wait_for(undecided._wait(), 30), False)
        self.assertIn("approval_timeout", logs.output[0])
        self.assertIs(await accepted._wait(), True)

    async def test_no_approval_timeout_waits(self):
        ex = ib.CodeExecutor()
        ex._loop = asyncio.get_running_loop()
        req = ib.ApprovalRequest(ex._loop, "s", "t", {}, "")
        ex._approval_created(req)
        await asyncio.sleep(0.2)
        self.assertFalse(req.decided)


class GenerateMcpSources(unittest.IsolatedAsyncioTestCase):
    def tearDown(self):
        compat._SOURCES.clear()

    async def test_remembers_servers_for_later_executors(self):
        self.assertIsNone(await ib.generate_mcp_sources("brave_search", {"command": "x"}, Path("mcptools")))
        await ib.generate_mcp_sources(server_name="other", server_params={"url": "http://127.0.0.1:1/mcp"})
        self.assertEqual(compat._SOURCES, {"brave_search": {"command": "x"}, "other": {"url": "http://127.0.0.1:1/mcp"}})

    async def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            await ib.generate_mcp_sources("", {"command": "x"})
        with self.assertRaises(TypeError):
            await ib.generate_mcp_sources("s", ["command"])


if __name__ == "__main__":
    unittest.main()
