# A MAC-learning switch written on os-ken's API, for crates/cli/tests/osken.rs
# and the example session in docs/openflow.md. Debian's python3-os-ken ships
# the library without its sample applications, so we carry our own.
#
#   osken-manager --ofp-listen-host 127.0.0.1 --ofp-tcp-listen-port 6653 simple_switch.py
#
# What it does (OpenFlow 1.3 only):
# - when a switch connects, it installs a table-miss flow (priority 0, empty
#   match) that sends whole frames to the controller (max_len NO_BUFFER);
# - on every PACKET_IN it learns the frame's source MAC on its in_port (one
#   table per datapath); when the destination is known it installs a flow
#   (in_port, eth_dst, eth_src -> output) at priority 1 and sends the frame
#   out of that port, else it floods the frame. The switch buffers nothing,
#   so every PACKET_OUT carries the frame itself.
#
# It logs one line per PACKET_IN and per installed flow ("learn", "flow").

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_3

LEARNED_PRIORITY = 1


class LearningSwitch(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # datapath id -> {mac: port}
        self.ports_by_mac = {}

    @staticmethod
    def flow(dp, priority, match, actions):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        apply = parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=priority,
                                      match=match, instructions=[apply]))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        to_controller = parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)
        self.flow(dp, 0, parser.OFPMatch(), [to_controller])
        self.ports_by_mac.setdefault(dp.id, {})
        self.logger.info("switch %016x: table-miss flow to the controller", dp.id)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocol(ethernet.ethernet)
        if eth is None:
            return
        table = self.ports_by_mac.setdefault(dp.id, {})
        if table.get(eth.src) != in_port:
            self.logger.info("learn %016x %s on port %d", dp.id, eth.src, in_port)
        table[eth.src] = in_port

        out_port = table.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out_port)]
        if out_port != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_dst=eth.dst, eth_src=eth.src)
            self.flow(dp, LEARNED_PRIORITY, match, actions)
            self.logger.info("flow %016x in_port=%d %s -> %s output:%d",
                             dp.id, in_port, eth.src, eth.dst, out_port)
        # No buffer on the switch: the frame goes back with the PACKET_OUT.
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER,
                                        in_port=in_port, actions=actions, data=msg.data))
