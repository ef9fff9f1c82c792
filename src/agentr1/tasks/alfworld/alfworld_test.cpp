// The alfworld family: observations in ALFWorld's phrasing on a hand-made room, the PDDL
// rules (closed receptacles, one object in hand, canContain, appliances), goal tests by
// hand, invalid input, the generator (determinism, levels, unseen test layouts), the
// expert on every level and task type, the game (rewards, step limit, samples read back
// from JSONL), the family's options, samples, demonstrations and registration.
#include <gtest/gtest.h>

#include <set>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/env/text_game.h"
#include "agentr1/tasks/alfworld/alfworld_expert.h"
#include "agentr1/tasks/alfworld/alfworld_family.h"
#include "agentr1/tasks/alfworld/alfworld_game.h"
#include "agentr1/tasks/alfworld/alfworld_generator.h"
#include "agentr1/tasks/alfworld/alfworld_world.h"
#include "agentr1/tasks/play.h"
#include "agentr1/env/agent_env.h"
#include "agentr1/text/jinja/chat_template.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::tasks {
namespace {

using namespace alfworld;

// countertop 1 (mug 2, knife 1), fridge 1 (apple 1, closed), sinkbasin 1, cabinet 1
// (closed), desk 1 (desklamp 1, book 1); goal: a clean mug in a cabinet.
World kitchen() {
  World w;
  w.room = "kitchen";
  w.receptacles = {{"cabinet", 1, false}, {"countertop", 1, false}, {"desk", 1, false},
                   {"fridge", 1, false},  {"sinkbasin", 1, false}};
  Object mug{"mug", 2, 1};
  Object knife{"knife", 1, 1};
  Object apple{"apple", 1, 3};
  Object lamp{"desklamp", 1, 2};
  Object book{"book", 1, 2};
  w.objects = {mug, knife, apple, lamp, book};
  w.goal = {TaskType::kClean, "mug", "cabinet", 0};
  return w;
}

std::string obs(World& w, const std::string& cmd) { return apply_command(w, cmd).observation; }

TEST(AlfworldWorld, IntroAndArrivalInAlfworldPhrasing) {
  World w = kitchen();
  EXPECT_EQ(intro_text(w),
            "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, "
            "a desk 1, a fridge 1, and a sinkbasin 1.\n\nYour task is to: put a clean mug in cabinet.");
  EXPECT_EQ(obs(w, "go to countertop 1"),
            "You arrive at countertop 1. On the countertop 1, you see a mug 2, and a knife 1.");
  EXPECT_EQ(obs(w, "look"), "You are facing the countertop 1. Next to it, you see nothing.");
  EXPECT_EQ(obs(w, "go to fridge 1"), "You arrive at fridge 1. The fridge 1 is closed.");
  EXPECT_EQ(obs(w, "go to sinkbasin 1"), "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.");
  EXPECT_EQ(obs(w, "inventory"), "You are not carrying anything.");
}

TEST(AlfworldWorld, ClosedReceptaclesOneObjectInHandAndAppliances) {
  World w = kitchen();
  obs(w, "go to fridge 1");
  EXPECT_EQ(obs(w, "take apple 1 from fridge 1"), "Nothing happens.");  // closed
  EXPECT_EQ(obs(w, "open fridge 1"), "You open the fridge 1. The fridge 1 is open. In it, you see a apple 1.");
  EXPECT_EQ(obs(w, "open fridge 1"), "Nothing happens.");  // already open
  EXPECT_EQ(obs(w, "take apple 1 from fridge 1"), "You pick up the apple 1 from the fridge 1.");
  EXPECT_EQ(obs(w, "inventory"), "You are carrying: a apple 1.");
  EXPECT_EQ(obs(w, "examine fridge 1"), "The fridge 1 is open. In it, you see nothing.");
  EXPECT_EQ(obs(w, "heat apple 1 with fridge 1"), "Nothing happens.");  // a fridge cools
  EXPECT_EQ(obs(w, "cool apple 1 with fridge 1"), "You cool the apple 1 using the fridge 1.");
  EXPECT_EQ(obs(w, "examine apple 1"), "This is a cold apple 1.");
  EXPECT_EQ(obs(w, "close fridge 1"), "You close the fridge 1.");
  EXPECT_EQ(obs(w, "put apple 1 in fridge 1"), "Nothing happens.");  // closed again
  obs(w, "go to countertop 1");
  EXPECT_EQ(obs(w, "take mug 2 from countertop 1"), "Nothing happens.");  // hands full
  EXPECT_EQ(obs(w, "  PUT Apple 1   in/on  CounterTop 1 "), "You move the apple 1 to the countertop 1.");
  EXPECT_EQ(obs(w, "take mug 2 from countertop 1"), "You pick up the mug 2 from the countertop 1.");
  EXPECT_EQ(obs(w, "clean mug 2 with countertop 1"), "Nothing happens.");
  obs(w, "go to sinkbasin 1");
  EXPECT_EQ(obs(w, "clean mug 2 with sinkbasin 1"), "You clean the mug 2 using the sinkbasin 1.");
  EXPECT_EQ(obs(w, "examine mug 2"), "This is a clean mug 2.");
  EXPECT_FALSE(goal_met(w));
  obs(w, "go to cabinet 1");
  EXPECT_EQ(obs(w, "move mug 2 to cabinet 1"), "Nothing happens.");  // closed
  obs(w, "open cabinet 1");
  EXPECT_FALSE(goal_met(w));
  EXPECT_EQ(obs(w, "move mug 2 to cabinet 1"), "You move the mug 2 to the cabinet 1.");
  EXPECT_TRUE(goal_met(w));
}

TEST(AlfworldWorld, CanContainHeatStatesAndLamp) {
  World w = kitchen();
  obs(w, "go to countertop 1");
  obs(w, "take knife 1 from countertop 1");
  obs(w, "go to desk 1");
  EXPECT_EQ(obs(w, "move knife 1 to desk 1"), "Nothing happens.");  // a desk holds no knives (canContain)
  EXPECT_EQ(obs(w, "examine desklamp 1"), "This desklamp 1 is off.");
  EXPECT_EQ(obs(w, "take desklamp 1 from desk 1"), "Nothing happens.");  // lamps are not pickupable
  EXPECT_EQ(obs(w, "use desklamp 1"), "You turn on the desklamp 1.");
  EXPECT_EQ(obs(w, "examine desklamp 1"), "This desklamp 1 is on.");
  EXPECT_EQ(obs(w, "use book 1"), "Nothing happens.");
  World h = kitchen();
  h.held = 2;
  h.objects[2].receptacle = -1;
  h.receptacles.push_back({"microwave", 1, false});
  h.agent_at = 5;
  EXPECT_EQ(obs(h, "heat apple 1 with microwave 1"), "You heat the apple 1 using the microwave 1.");
  h.objects[2].clean = true;
  EXPECT_EQ(obs(h, "examine apple 1"), "This is a hot and clean apple 1.");
  h.agent_at = 3;
  obs(h, "cool apple 1 with fridge 1");
  EXPECT_EQ(obs(h, "examine apple 1"), "This is a cool and clean apple 1.");  // cooling clears hot
}

TEST(AlfworldWorld, InvalidInputIsNothingHappens) {
  World w = kitchen();
  const json before = w.to_json();
  for (const std::string& cmd :
       {std::string(), std::string("   "), std::string("gø to fridge 1"), std::string(100000, 'x'),
        std::string("go to fridge 9"), std::string("take unicorn 1 from countertop 1"),
        std::string("take mug 2 from countertop 1"),  // not there yet
        std::string("go to"), std::string("put"), std::string("put mug 2"), std::string("move  to "),
        std::string("\xff\xfe\x00 open", 8), std::string("open countertop 1"), std::string("help")}) {
    const CommandResult r = apply_command(w, cmd);
    EXPECT_FALSE(r.valid) << cmd.substr(0, 40);
    EXPECT_EQ(r.observation, "Nothing happens.");
  }
  EXPECT_EQ(w.to_json(), before);
  obs(w, "go to countertop 1");
  EXPECT_EQ(obs(w, "go to countertop 1"), "Nothing happens.");  // already there
}

TEST(AlfworldWorld, AdmissibleCommandsAreExactlyTheValidOnes) {
  World w = kitchen();
  obs(w, "go to countertop 1");
  EXPECT_EQ(admissible_commands(w),
            (std::vector<std::string>{"examine countertop 1", "examine knife 1", "examine mug 2", "go to cabinet 1",
                                      "go to desk 1", "go to fridge 1", "go to sinkbasin 1", "inventory", "look",
                                      "take knife 1 from countertop 1", "take mug 2 from countertop 1"}));
  obs(w, "take mug 2 from countertop 1");
  obs(w, "go to sinkbasin 1");
  EXPECT_EQ(admissible_commands(w),
            (std::vector<std::string>{"clean mug 2 with sinkbasin 1", "examine mug 2", "examine sinkbasin 1",
                                      "go to cabinet 1", "go to countertop 1", "go to desk 1", "go to fridge 1",
                                      "inventory", "look", "move mug 2 to sinkbasin 1"}));
  for (const std::string& c : admissible_commands(w)) {
    World copy = w;
    EXPECT_TRUE(apply_command(copy, c).valid) << c;
  }
}

TEST(AlfworldWorld, GoalsByHand) {
  World w = kitchen();
  w.goal = {TaskType::kLookAtInLight, "book", "desklamp", 0};
  EXPECT_EQ(w.goal.text(), "look at book under the desklamp");
  w.goal.template_index = 1;
  EXPECT_EQ(w.goal.text(), "examine the book with the desklamp");
  obs(w, "go to desk 1");
  obs(w, "take book 1 from desk 1");
  EXPECT_FALSE(goal_met(w));  // lamp off
  obs(w, "use desklamp 1");
  EXPECT_TRUE(goal_met(w));
  obs(w, "go to fridge 1");
  EXPECT_FALSE(goal_met(w));  // not under the lamp any more

  World t = kitchen();
  t.goal = {TaskType::kPickTwo, "mug", "cabinet", 1};
  EXPECT_EQ(t.goal.text(), "find two mug and put them in cabinet");
  t.receptacles.push_back({"cabinet", 2, true});
  t.objects.push_back({"mug", 1, 5});
  t.objects[0].receptacle = 0;  // mug 2 in cabinet 1, mug 1 in cabinet 2
  EXPECT_FALSE(goal_met(t));
  t.objects[0].receptacle = 5;
  EXPECT_TRUE(goal_met(t));

  World p = kitchen();
  p.goal = {TaskType::kHeat, "apple", "countertop", 0};
  EXPECT_EQ(p.goal.text(), "put a hot apple in countertop");
  p.objects[2].receptacle = 1;
  EXPECT_FALSE(goal_met(p));  // on the countertop but not hot
  p.objects[2].hot = true;
  EXPECT_TRUE(goal_met(p));
  p.goal = {TaskType::kPickAndPlace, "apple", "countertop", 1};
  EXPECT_EQ(p.goal.text(), "put some apple on countertop");
  EXPECT_TRUE(goal_met(p));
}

TEST(AlfworldGenerator, DeterministicAndVariedBySeed) {
  const WorldSpec a{3, 5, 2, DataSplit::kTrain, TaskType::kHeat};
  EXPECT_EQ(generate_world(a).to_json(), generate_world(a).to_json());
  WorldSpec b = a;
  b.index = 6;
  EXPECT_NE(generate_world(a).to_json(), generate_world(b).to_json());
  EXPECT_EQ(WorldSpec::from_json(json::parse(a.to_json().dump())).to_json(), a.to_json());
  EXPECT_THROW(generate_world(WorldSpec{1, 0, 5, DataSplit::kTrain, TaskType::kHeat}), Error);
  EXPECT_THROW(WorldSpec::from_json(json{{"seed", 1}}), Error);
  json bad = a.to_json();
  bad["task_type"] = "juggle";
  EXPECT_THROW(WorldSpec::from_json(bad), Error);
}

TEST(AlfworldGenerator, LevelsAndStartState) {
  const int lo[] = {4, 6, 9, 13};
  const int hi[] = {5, 8, 12, 18};
  for (int level = 1; level <= 4; ++level) {
    for (TaskType t : all_task_types()) {
      for (int i = 0; i < 40; ++i) {
        const World w = generate_world({11, i, level, DataSplit::kTrain, t});
        const int n = static_cast<int>(w.receptacles.size());
        EXPECT_GE(n, lo[level - 1]);
        EXPECT_LE(n, hi[level - 1]);
        EXPECT_FALSE(goal_met(w));
        EXPECT_EQ(w.agent_at, -1);
        EXPECT_EQ(w.held, -1);
        for (const Receptacle& r : w.receptacles) {
          EXPECT_FALSE(r.opened);
          if (level == 1 && is_openable(r.type)) EXPECT_TRUE(r.type == "fridge" || r.type == "microwave") << r.type;
        }
        int goal_objects = 0;
        for (const Object& o : w.objects) {
          if (o.type != w.goal.object_type) continue;
          ++goal_objects;
          if (t != TaskType::kLookAtInLight) EXPECT_NE(w.receptacles[o.receptacle].type, w.goal.receptacle_type);
          if (level == 1) EXPECT_FALSE(is_openable(w.receptacles[o.receptacle].type));
        }
        EXPECT_GE(goal_objects, t == TaskType::kPickTwo ? 2 : 1);
        if (t == TaskType::kHeat || t == TaskType::kCool) EXPECT_EQ(w.room, "kitchen");
        if (t == TaskType::kLookAtInLight) EXPECT_TRUE(w.room == "livingroom" || w.room == "bedroom");
      }
    }
  }
}

TEST(AlfworldGenerator, TestLayoutsAreUnseenInTrain) {
  std::set<std::string> train;
  std::set<std::string> test;
  for (int level = 1; level <= 4; ++level) {
    for (TaskType t : all_task_types()) {
      for (int i = 0; i < 60; ++i) {
        train.insert(layout_signature(generate_world({5, i, level, DataSplit::kTrain, t})));
        test.insert(layout_signature(generate_world({5, i, level, DataSplit::kTest, t})));
      }
    }
  }
  EXPECT_GT(test.size(), 100u);
  for (const std::string& s : test) {
    EXPECT_EQ(train.count(s), 0u) << s;
    EXPECT_TRUE(is_test_layout(s));
  }
  for (const std::string& s : train) EXPECT_FALSE(is_test_layout(s));
}

TEST(AlfworldExpert, SolvesEveryLevelAndTaskTypeWithAdmissibleCommands) {
  int worlds = 0;
  int longest = 0;
  for (int level = 1; level <= 4; ++level) {
    for (TaskType t : all_task_types()) {
      for (int i = 0; i < 300; ++i) {
        World w = generate_world({static_cast<uint64_t>(1000 + i), i, level, i % 2 ? DataSplit::kTest
                                                                                  : DataSplit::kTrain, t});
        int steps = 0;
        while (std::optional<std::string> cmd = expert_command(w)) {
          const std::vector<std::string> adm = admissible_commands(w);
          ASSERT_TRUE(std::find(adm.begin(), adm.end(), *cmd) != adm.end()) << *cmd;
          ASSERT_TRUE(apply_command(w, *cmd).valid) << *cmd;
          ASSERT_LT(++steps, 25) << w.to_json().dump();
        }
        ASSERT_TRUE(goal_met(w)) << w.to_json().dump();
        longest = std::max(longest, steps);
        ++worlds;
      }
    }
  }
  EXPECT_EQ(worlds, 7200);
  EXPECT_LE(longest, 16);
}

TEST(AlfworldExpert, FinishesEpisodesStartedByHand) {
  World w = kitchen();
  obs(w, "go to fridge 1");
  obs(w, "open fridge 1");
  obs(w, "take apple 1 from fridge 1");  // a wrong object in hand
  int steps = 0;
  while (std::optional<std::string> cmd = expert_command(w)) {
    ASSERT_TRUE(apply_command(w, *cmd).valid) << *cmd;
    ASSERT_LT(++steps, 15);
  }
  EXPECT_TRUE(goal_met(w));
  EXPECT_EQ(w.held, -1);
}

Sample sample_of(const AlfworldFamily& fam, DataSplit split, uint64_t seed, int64_t i) {
  return fam.make_dataset(split, i + 1, seed)[static_cast<size_t>(i)];
}

TEST(AlfworldGame, RewardOnceWhenWonAndTheSampleReplaysFromJsonl) {
  AlfworldFamily fam(AlfworldFamilyOptions::from_json({{"min_level", 3}, {"max_level", 3}}));
  const Sample s = sample_of(fam, DataSplit::kTest, 9, 4);
  AlfworldGame game;
  const std::string intro = game.reset(s);
  EXPECT_NE(intro.find("Your task is to: " + s.ground_truth.get<std::string>() + "."), std::string::npos);
  std::vector<std::string> trace;
  float total = 0;
  env::GameStep g;
  while (std::optional<std::string> cmd = game.expert_action()) {
    g = game.step(*cmd);
    trace.push_back(g.observation);
    total += g.reward;
    if (!g.done) {
      EXPECT_EQ(g.reward, 0.0f);
      EXPECT_EQ(g.info["won"], false);
    }
  }
  EXPECT_TRUE(g.done);
  EXPECT_EQ(g.reward, 1.0f);
  EXPECT_EQ(total, 1.0f);
  EXPECT_EQ(g.info["won"], true);
  EXPECT_TRUE(game.admissible_commands().empty());
  EXPECT_EQ(game.summary()["won"], true);
  EXPECT_EQ(game.summary()["goal"], s.ground_truth);
  const env::GameStep after = game.step("look");
  EXPECT_EQ(after.observation, "Nothing happens.");
  EXPECT_TRUE(after.done);
  EXPECT_EQ(after.reward, 0.0f);

  const Sample back = Sample::from_json(json::parse(s.to_json().dump()));
  AlfworldGame replay(AlfworldGameOptions::from_json(back.env_kwargs["game"]));
  EXPECT_EQ(replay.reset(back), intro);
  std::vector<std::string> trace2;
  while (std::optional<std::string> cmd = replay.expert_action()) trace2.push_back(replay.step(*cmd).observation);
  EXPECT_EQ(trace2, trace);
}

TEST(AlfworldGame, StepLimitEndsUnsolvedEpisodes) {
  AlfworldFamily fam(AlfworldFamilyOptions::from_json({{"step_limit", 3}}));
  const Sample s = sample_of(fam, DataSplit::kTrain, 1, 0);
  EXPECT_EQ(s.env_kwargs["game"]["step_limit"], 3);
  AlfworldGame game(AlfworldGameOptions::from_json(s.env_kwargs["game"]));
  game.reset(s);
  env::GameStep g = game.step("");
  EXPECT_EQ(g.observation, "Nothing happens.");
  EXPECT_EQ(g.info["valid"], false);
  EXPECT_FALSE(g.done);
  g = game.step("look");
  EXPECT_EQ(g.info["valid"], true);
  EXPECT_FALSE(g.done);
  g = game.step("dance");
  EXPECT_TRUE(g.done);
  EXPECT_EQ(g.reward, 0.0f);
  EXPECT_EQ(g.info["won"], false);
  EXPECT_EQ(g.info["step_limit_reached"], true);
  EXPECT_FALSE(game.expert_action().has_value());
}

TEST(AlfworldGame, BadSamplesAndOptionsThrow) {
  AlfworldFamily fam;
  Sample s = sample_of(fam, DataSplit::kTrain, 1, 0);
  AlfworldGame game;
  EXPECT_THROW(game.step("look"), Error);  // before reset
  Sample wrong = s;
  wrong.ground_truth = "put a banana in moon";
  EXPECT_THROW(game.reset(wrong), Error);
  Sample none = s;
  none.extra_info = json::object();
  EXPECT_THROW(game.reset(none), Error);
  Sample bad = s;
  bad.extra_info["world"]["level"] = 9;
  EXPECT_THROW(game.reset(bad), Error);
  EXPECT_THROW(AlfworldGameOptions::from_json({{"step_limt", 5}}), Error);
  EXPECT_THROW(AlfworldGameOptions::from_json({{"step_limit", 0}}), Error);
  try {
    AlfworldGameOptions::from_json({{"speed", 1}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown config key 'env_kwargs.game.speed'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Valid keys under 'env_kwargs.game': step_limit."), std::string::npos)
        << e.what();
  }
}

TEST(AlfworldFamily, OptionsValidateAndListKeys) {
  try {
    AlfworldFamilyOptions::from_json({{"max_levl", 2}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown config key 'data.task_kwargs.max_levl'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("did you mean 'data.task_kwargs.max_level'?"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Valid keys under 'data.task_kwargs': min_level, max_level, task_types"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(AlfworldFamilyOptions::from_json({{"min_level", 3}, {"max_level", 2}}), Error);
  EXPECT_THROW(AlfworldFamilyOptions::from_json({{"max_level", 5}}), Error);
  EXPECT_THROW(AlfworldFamilyOptions::from_json({{"task_types", json::array()}}), Error);
  EXPECT_THROW(AlfworldFamilyOptions::from_json({{"task_types", {"pick_two_obj_and_place", "pick_two_obj_and_place"}}}),
               Error);
  EXPECT_THROW(AlfworldFamilyOptions::from_json({{"task_types", {"slice_everything"}}}), Error);
  EXPECT_THROW(AlfworldFamilyOptions::from_json({{"show_admissible", 1}}), Error);
  EXPECT_THROW(AlfworldFamilyOptions::from_json(json::array()), Error);
  const AlfworldFamilyOptions o = AlfworldFamilyOptions::from_json(
      {{"task_types", {"look_at_obj_in_light"}}, {"use_system_prompt", false}, {"show_admissible", true}});
  EXPECT_EQ(AlfworldFamilyOptions::from_json(o.to_json()).to_json(), o.to_json());
}

TEST(AlfworldFamily, SamplesFollowTheConventions) {
  AlfworldFamily fam(AlfworldFamilyOptions::from_json({{"min_level", 1}, {"max_level", 4}}));
  const std::vector<Sample> a = fam.make_dataset(DataSplit::kTrain, 200, 42);
  const std::vector<Sample> b = fam.make_dataset(DataSplit::kTrain, 200, 42);
  ASSERT_EQ(a.size(), 200u);
  std::set<std::string> types;
  std::set<int> levels;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].to_json(), b[i].to_json());
    EXPECT_EQ(a[i].agent_name, "alfworld");
    EXPECT_EQ(a[i].reward_style, "env");
    EXPECT_EQ(a[i].data_source, "alfworld");
    EXPECT_EQ(a[i].env_kwargs, (json{{"game", {{"step_limit", 50}}}}));
    EXPECT_FALSE(a[i].env_kwargs.contains("context"));
    ASSERT_EQ(a[i].prompt.size(), 1u);
    EXPECT_EQ(a[i].prompt[0]["role"], "system");
    EXPECT_NE(a[i].prompt[0]["content"].get<std::string>().find("<action>"), std::string::npos);
    const WorldSpec spec = WorldSpec::from_json(a[i].extra_info["world"]);
    EXPECT_EQ(spec.index, static_cast<int64_t>(i));
    EXPECT_EQ(spec.split, DataSplit::kTrain);
    EXPECT_EQ(generate_world(spec).goal.text(), a[i].ground_truth);
    types.insert(task_type_name(spec.task_type));
    levels.insert(spec.level);
  }
  EXPECT_EQ(types.size(), 6u);
  EXPECT_EQ(levels, (std::set<int>{1, 2, 3, 4}));
  EXPECT_NE(fam.make_dataset(DataSplit::kTrain, 5, 43)[0].to_json(), a[0].to_json());

  AlfworldFamily quiet(AlfworldFamilyOptions::from_json(
      {{"use_system_prompt", false}, {"show_admissible", true}, {"task_types", {"look_at_obj_in_light"}}}));
  const Sample q = quiet.make_dataset(DataSplit::kTest, 1, 1)[0];
  EXPECT_EQ(q.prompt, json::array({{{"role", "user"}, {"content", kAlfworldShortInstruction}}}));
  EXPECT_EQ(q.env_kwargs["show_admissible"], true);
  EXPECT_EQ(q.extra_info["world"]["task_type"], "look_at_obj_in_light");
  EXPECT_THROW(fam.make_dataset(DataSplit::kTrain, -1, 1), Error);

  EXPECT_EQ(fam.recipe_defaults(),
            (std::vector<std::string>{"rollout.max_steps=50", "rollout.max_new_tokens=48",
                                      "rollout.max_response_tokens=2400", "rollout.max_prompt_tokens=1984",
                                      "++rollout.env_kwargs.context={type: sliding_window, keep_last: 4}"}));
  // They apply to a rollout section shaped like the trainer's defaults.
  json tree = {{"rollout",
                {{"max_steps", 4}, {"max_new_tokens", 128}, {"max_response_tokens", 384}, {"max_prompt_tokens", 1024},
                 {"env_kwargs", json::object()}}}};
  apply_overrides(tree, fam.recipe_defaults());
  EXPECT_EQ(tree["rollout"]["max_steps"], 50);
  EXPECT_EQ(tree["rollout"]["env_kwargs"]["context"], (json{{"type", "sliding_window"}, {"keep_last", 4}}));
}

TEST(AlfworldFamily, DemonstrationsAndRegistration) {
  register_alfworld_family();
  register_alfworld_family();  // idempotent
  EXPECT_TRUE(has_task_family("alfworld"));
  EXPECT_TRUE(env::has_game("alfworld"));
  EXPECT_THROW(env::make_game("alfworld", {{"stepz", 1}}), Error);
  auto fam = make_task_family("alfworld", {{"max_level", 4}});
  const text::ChatTemplate tmpl = text::ChatTemplate::for_family(text::ChatFamily::kQwen3);
  std::vector<std::string> rendered;
  const std::vector<json> demos = fam->demonstrations(30, 7, tmpl, "<|im_end|>", &rendered);
  ASSERT_EQ(demos.size(), 30u);
  ASSERT_EQ(rendered.size(), 30u);
  const std::vector<Sample> train = fam->make_dataset(DataSplit::kTrain, 30, 7);
  for (size_t i = 0; i < demos.size(); ++i) {
    EXPECT_EQ(demos[i]["sample"], train[i].to_json());
    const json& acts = demos[i]["actions"];
    ASSERT_GE(acts.size(), 2u);
    const std::string first = acts[0].get<std::string>();
    EXPECT_EQ(first.rfind("<action>go to ", 0), 0u) << first;
    EXPECT_NE(first.find("</action><|im_end|>"), std::string::npos);
    EXPECT_NE(rendered[i].find("Your task is to: " + train[i].ground_truth.get<std::string>()), std::string::npos);
  }
  // agentr1 play: the default game episode, with the expert.
  auto ep = fam->play_episode(train[0]);
  const json first = ep->reset();
  EXPECT_NE(first["observation"].get<std::string>().find("You are in the middle of a room."), std::string::npos);
  json last;
  while (!ep->done()) last = ep->step(*ep->expert_action());
  EXPECT_EQ(last["reward"], 1.0);
  EXPECT_EQ(last["info"]["summary"]["won"], true);
}

// The registered "alfworld" env through GameEnv (tokenizer, chat template, the family's
// sliding window): the expert's commands as responses win with game_reward 1.
TEST(AlfworldFamily, PlaysThroughGameEnvWithTheSlidingWindow) {
  register_alfworld_family();
  const text::Tokenizer tok = text::Tokenizer::load(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3");
  const text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(tok.chat_template());
  env::EnvContext ctx;
  ctx.tokenizer = &tok;
  ctx.chat_template = &tmpl;
  AlfworldFamily fam(AlfworldFamilyOptions::from_json({{"min_level", 4}, {"max_level", 4}, {"show_admissible", true},
                                                       {"task_types", {"pick_two_obj_and_place"}}}));
  const Sample s = fam.make_dataset(DataSplit::kTest, 1, 3)[0];
  json kwargs = s.env_kwargs;
  kwargs["context"] = {{"type", "sliding_window"}, {"keep_last", 4}};
  auto env = env::make_env("alfworld", ctx, kwargs);
  const std::string first = tok.decode(env->reset(s).tokens());
  EXPECT_NE(first.find("Your task is to: " + s.ground_truth.get<std::string>() + "."), std::string::npos);
  EXPECT_NE(first.find("Admissible actions: "), std::string::npos);
  AlfworldGame shadow;  // the same world, to ask the expert
  shadow.reset(s);
  env::StepResult r;
  int turns = 0;
  while (std::optional<std::string> cmd = shadow.expert_action()) {
    shadow.step(*cmd);
    const std::string text = "<action>" + *cmd + "</action>";
    TokenIds ids = tok.encode(text, true);
    ids.push_back(*tok.token_to_id("<|im_end|>"));
    r = env->step({ids, text});  // Action::text: without the trailing <|im_end|>
    ++turns;
  }
  EXPECT_GE(turns, 6);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.game_reward, 1.0f);
  EXPECT_EQ(r.info["game_summary"]["won"], true);
}

}  // namespace
}  // namespace agentr1::tasks
