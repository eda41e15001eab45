# A stand-in for the part of Homebrew's formula language that aep-kimi's
# formula uses. `ruby brew.rb OS ARCH FORMULA` (OS macos or linux, ARCH arm
# or intel) loads the formula as brew would on that machine and prints as
# JSON what brew would download, install and run as the service. Anything
# else the formula calls fails here, as an unknown method.
require "json"
require "pathname"

OS_NAME, ARCH_NAME, FORMULA_FILE = ARGV

PREFIX = Pathname.new("/opt/homebrew")

class Formula
  class << self
    def facts
      @facts ||= { "urls" => [], "sha256s" => [] }
    end

    def desc(text) = facts["desc"] = text
    def homepage(text) = facts["homepage"] = text
    def license(text) = facts["license"] = text
    def version(text) = facts["version"] = text
    def url(text) = facts["urls"] << text
    def sha256(text) = facts["sha256s"] << text

    def on_macos = (yield if OS_NAME == "macos")
    def on_linux = (yield if OS_NAME == "linux")
    def on_arm = (yield if ARCH_NAME == "arm")
    def on_intel = (yield if ARCH_NAME == "intel")

    def service(&block) = @service = block
    def test(&block) = @test = block

    def service_facts
      s = Service.new
      s.instance_exec(&@service) if @service
      s.facts
    end

    def tested? = !@test.nil?
  end

  class Bin
    attr_reader :installed

    def initialize = @installed = []
    def install(*names) = @installed.concat(names)
  end

  def bin = @bin ||= Bin.new
end

class Service
  attr_reader :facts

  def initialize = @facts = {}
  def opt_bin = PREFIX/"opt/aep-kimi/bin"
  def var = PREFIX/"var"
  def run(cmd) = @facts["run"] = Array(cmd).map(&:to_s)
  def keep_alive(value) = @facts["keep_alive"] = value
  def log_path(path) = @facts["log_path"] = path.to_s
  def error_log_path(path) = @facts["error_log_path"] = path.to_s
end

load FORMULA_FILE
klass = Object.const_get(:AepKimi)
f = klass.new
f.install
puts JSON.generate(klass.facts.merge(
  "installs" => f.bin.installed,
  "service" => klass.service_facts,
  "tested" => klass.tested?,
))
